"""Named points on the write paths where a harness may act: the chaos campaign (tools/faults.py)
installs a hook that kills the process at a configured point. Without a hook every point is a no-op.

Points: `after_record:<kind>` (a provider result recorded, before anything is written from it;
kind = extract, importance, summary, plan, embed), `after_plan`, `after_commit`,
`after_rederive_session` (a session's re-derivation committed, before the activity returns),
`mid_projection` (after the first vector row of a batch), `mid_erasure:<store>` (a store's
deletion committed, before the activity returns)."""

from __future__ import annotations

from collections.abc import Callable

from agent_memory.core.operation_keys import OperationKey

FaultHook = Callable[[str], None]
_hook: FaultHook | None = None


def install_fault_hook(hook: FaultHook | None) -> None:
    """Call `hook(point)` at every fault point from now on (None: no hook)."""
    global _hook
    _hook = hook


def fault_point(name: str, *, when: bool = True) -> None:
    """Hand the point to the installed hook, if any (`when`: only under this condition)."""
    if when and _hook is not None:
        _hook(name)


async def after_record(key: OperationKey) -> None:
    """OperationRecorder.after_record hook: `after_record:<kind>`, the kind being the operation
    key's prefix (the id's first segment: extract/…, summary/…, plan/…, embed/…)."""
    fault_point(f"after_record:{key.prefix}")
