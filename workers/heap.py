"""The long-running processes' garbage-collector setting.

CPython's full (generation 2) collection walks every tracked object, and a server's heap after
start-up is mostly objects that live as long as the process: imported modules, clients, pools,
validators. Walking them paused a context call for 130 ms at a full collection in the recall
benchmark (10k memories; 5.7 ms without the pause). Freezing the start-up heap moves it out of
the collector's view (`gc.freeze`), so a full collection walks only what requests allocated
since; reference counting still frees everything.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def freeze_startup_heap() -> int:
    """Collect what start-up left as garbage, then freeze the rest; returns the frozen count."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


@contextmanager
def startup_heap_frozen() -> Iterator[int]:
    """For a benchmark measuring what a server would: its heap frozen as the servers freeze
    theirs, thawed afterwards (the benchmark may run inside a longer process, e.g. the tests)."""
    try:
        yield freeze_startup_heap()
    finally:
        gc.unfreeze()
