"""Two started steps awaited together: both results, or the first failure with the other
cancelled (asyncio.gather would leave it running). The in-worker consolidation's importance and
summary; the consolidation workflow does the same with its activity handles, written out there
(its recorded commands are fingerprinted, tests/workflows/test_workflow_fingerprints.py)."""

from __future__ import annotations

import asyncio
from typing import TypeVar

A = TypeVar("A")
B = TypeVar("B")


async def await_both(first: asyncio.Future[A], second: asyncio.Future[B]) -> tuple[A, B]:
    try:
        return await first, await second
    except BaseException:
        # One failed (or the caller was cancelled): the other is not waited for.
        first.cancel()
        second.cancel()
        raise
