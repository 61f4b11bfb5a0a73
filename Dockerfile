# syntax=docker/dockerfile:1
# agent-memory worker image: `docker build -t agent-memory .`
# Runs `agent-memory worker` by default; see docker-compose.yml for the services it needs.

# --- build: install the project and its dependencies into a virtualenv -------------------------
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

# A compiler only for dependencies without a wheel for the target platform; it stays in this
# stage and never reaches the runtime image.
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*

RUN python -m venv /opt/venv
ENV PATH="/opt/venv/bin:$PATH"

WORKDIR /src
# .dockerignore admits only the packaging metadata and the packages.
COPY . .
# The library and the worker only: the embedded servers (the `[embedded]` extra) are for development.
# With the OpenTelemetry extra: traces are exported once OTEL_EXPORTER_OTLP_ENDPOINT is set (compose's
# `observability` profile), and nothing of it is started while it is not.
RUN pip install '.[otel]'

# --- runtime ------------------------------------------------------------------------------------
FROM python:3.11-slim

ENV PATH="/opt/venv/bin:$PATH" \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    AGENT_MEMORY_HOME=/data

# Non-root user; /data is its home for agent-memory state, /keys its key directory (mount a
# volume on each; a new named volume takes these owners and modes).
RUN groupadd --system --gid 10001 agentmemory \
    && useradd --system --uid 10001 --gid agentmemory --home-dir /data --no-create-home \
       --shell /usr/sbin/nologin agentmemory \
    && mkdir -p /data /keys \
    && chown agentmemory:agentmemory /data /keys \
    && chmod 0700 /data /keys

COPY --from=build /opt/venv /opt/venv

USER agentmemory:agentmemory
WORKDIR /data

ENTRYPOINT ["agent-memory"]
CMD ["worker"]
