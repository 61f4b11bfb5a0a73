"""A command whose reader stops reading (`agent-memory facts --json | head`) ends quietly: its
output is cut as in any pipeline, with no traceback on standard error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The entry point's exit path with a command that prints more than a pipe holds: run() is what
# `agent-memory` calls; main() stands for any command with long output.
LONG_OUTPUT = """
import workers.cli as cli
def main():
    for i in range(20000):
        print('{"memory_id": "%05d", "value": "lives in Lisbon"}' % i)
    return 0
cli.main = main
cli.run()
"""


def test_a_reader_that_stops_early_gets_no_traceback():
    command = subprocess.Popen([sys.executable, "-c", LONG_OUTPUT], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    assert command.stdout is not None and command.stderr is not None
    first = command.stdout.read(64)  # `head -c 64`, then the reader is gone
    command.stdout.close()
    errors = command.stderr.read().decode()
    code = command.wait(timeout=60)
    assert first.startswith(b'{"memory_id": "00000"')
    assert "Traceback" not in errors and "BrokenPipeError" not in errors, errors
    assert code == 1


def test_a_reader_that_reads_everything_gets_all_of_it():
    done = subprocess.run([sys.executable, "-c", LONG_OUTPUT], cwd=ROOT, capture_output=True, timeout=60)
    assert done.returncode == 0 and done.stderr == b""
    assert done.stdout.count(b"\n") == 20000
