"""The chaos worker process: `python -m tests.chaos.worker_main`.

A worker on the configured services (TEMPORAL_ADDRESS, DATABASE_URL, DATABASE_ADMIN_URL,
REDIS_URL, AGENT_MEMORY_TASK_QUEUE, AGENT_MEMORY_HOME) with the offline providers, each real
provider call appending one line (kind, tenant, request digest) to AGENT_MEMORY_PROVIDER_LOG.
Fault points come from AGENT_MEMORY_FAULTS / AGENT_MEMORY_FAULTS_STATE (tools/faults.py).
SIGTERM stops it; a fault point SIGKILLs it.
"""

from __future__ import annotations

import sys

from tools.chaos import worker_main

if __name__ == "__main__":
    sys.exit(worker_main())
