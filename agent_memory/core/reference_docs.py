"""Reference tables generated into docs/ between two markers (the settings, the metric families),
so the documented list is the one the code has; each table's module runs this as its command:
`python -m <module>` prints the table, `--write docs/operations.md` rewrites it in place."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

from agent_memory.core.errors import InvalidInput


def with_table(document: str, start: str, end: str, table: str, what: str) -> str:
    """`document` with the text between the `start` and `end` markers replaced by `table`."""
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if not pattern.search(document):
        raise InvalidInput(f"the document has no {what} reference markers")
    return pattern.sub(lambda _: start + table + end, document, count=1)


def reference_command(argv: list[str] | None, *, module: str, rewritten: Callable[[str], str],
                      table: Callable[[], str]) -> int:
    """Print the table, or with `--write FILE` rewrite it in place in FILE."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--write"] and len(args) == 2:
        path = Path(args[1])
        path.write_text(rewritten(path.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    if args:
        print(f"usage: python -m {module} [--write docs/operations.md]", file=sys.stderr)
        return 2
    sys.stdout.write(table())
    return 0
