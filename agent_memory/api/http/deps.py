"""What every route takes besides its key: the app's MemoryClient, and a subject id checked as
an identifier (422 naming the fix otherwise)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from agent_memory.api.client import MemoryClient
from agent_memory.core.models import check_identifier


def memory_client(request: Request) -> MemoryClient:
    client: MemoryClient = request.app.state.client
    return client


ClientDep = Annotated[MemoryClient, Depends(memory_client)]


def subject(subject_id: str) -> str:
    return check_identifier("subject", subject_id)
