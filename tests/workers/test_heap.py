"""The long-running processes freeze their start-up heap (workers/heap.py): a full collection
then walks only what was allocated since, and a benchmark thaws what it froze."""

from __future__ import annotations

import gc

from workers.heap import freeze_startup_heap, startup_heap_frozen


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_a_frozen_heap_is_out_of_the_collectors_view_and_thawed_after_a_benchmark():
    assert gc.get_freeze_count() == 0
    kept = [_Cycle() for _ in range(1_000)]
    with startup_heap_frozen() as frozen:
        assert frozen >= 1_000 and gc.get_freeze_count() >= 1_000
        # What start-up allocated is not walked by a full collection; what comes after still is.
        assert not any(o is kept[0] for o in gc.get_objects())
        later = _Cycle()
        del later
        assert gc.collect() >= 1  # the cycle made after the freeze is found and freed
    assert gc.get_freeze_count() == 0
    assert any(o is kept[0] for o in gc.get_objects(generation=2))


def test_garbage_left_by_start_up_is_collected_before_the_freeze():
    _Cycle()  # a cycle nobody holds: garbage the freeze must not keep forever
    try:
        frozen = freeze_startup_heap()
        assert not any(isinstance(o, _Cycle) for o in gc.get_objects())
        assert frozen > 0
    finally:
        gc.unfreeze()
