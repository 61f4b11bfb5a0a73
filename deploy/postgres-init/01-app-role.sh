#!/usr/bin/env bash
# First-start initialisation of the pgvector/pgvector image (run by its entrypoint from
# /docker-entrypoint-initdb.d, only while the data directory is empty, as $POSTGRES_USER over
# the local socket). Later password changes need ALTER ROLE; this script will not run again.
#
# Creates:
#   agent_memory_owner  owns database agent_memory; runs the migrations (DATABASE_ADMIN_URL)
#   agent_memory_app    the application role (DATABASE_URL): LOGIN, no superuser, no BYPASSRLS,
#                       so row-level security confines it; migration 001 grants its privileges
#   vector              the pgvector extension in agent_memory (needs a superuser to create)
#   agent_memory_key_rotator, agent_memory_maintainer
#                       NOLOGIN roles owning the definer functions of key rotation and compaction
#                       (migration 031); the app calls those functions and cannot switch to them
#   temporal            owns databases temporal and temporal_visibility (Temporal's own schema)
set -euo pipefail

: "${AGENT_MEMORY_OWNER_PASSWORD:?AGENT_MEMORY_OWNER_PASSWORD must be set on the postgres service}"
: "${AGENT_MEMORY_APP_PASSWORD:?AGENT_MEMORY_APP_PASSWORD must be set on the postgres service}"
: "${TEMPORAL_DB_PASSWORD:?TEMPORAL_DB_PASSWORD must be set on the postgres service}"

# Passwords travel as psql variables and are quoted by psql (:'var'), never spliced into SQL.
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
    -v owner_password="$AGENT_MEMORY_OWNER_PASSWORD" \
    -v app_password="$AGENT_MEMORY_APP_PASSWORD" \
    -v temporal_password="$TEMPORAL_DB_PASSWORD" <<'EOSQL'
SELECT 'CREATE ROLE agent_memory_owner'
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'agent_memory_owner')\gexec
ALTER ROLE agent_memory_owner WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
    PASSWORD :'owner_password';

SELECT 'CREATE ROLE agent_memory_app'
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'agent_memory_app')\gexec
ALTER ROLE agent_memory_app WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
    PASSWORD :'app_password';

SELECT 'CREATE ROLE temporal'
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'temporal')\gexec
ALTER ROLE temporal WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS
    PASSWORD :'temporal_password';

SELECT 'CREATE DATABASE agent_memory OWNER agent_memory_owner'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'agent_memory')\gexec
SELECT 'CREATE DATABASE temporal OWNER temporal'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'temporal')\gexec
SELECT 'CREATE DATABASE temporal_visibility OWNER temporal'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = 'temporal_visibility')\gexec

-- Only agent-memory's roles may connect to its database (Temporal's role may not).
REVOKE ALL ON DATABASE agent_memory FROM PUBLIC;
GRANT CONNECT, TEMPORARY ON DATABASE agent_memory TO agent_memory_app;
REVOKE ALL ON DATABASE temporal, temporal_visibility FROM PUBLIC;
EOSQL

# pgvector in the application database; the migrations' CREATE EXTENSION IF NOT EXISTS is then
# a no-op, so the owner role needs no superuser rights. The two NOLOGIN roles that own the
# maintenance functions need CREATEROLE and a superuser's grant on pg_statistic, which the
# NOCREATEROLE owner lacks; migration 006 finds them in place. The owner administers them (never
# inherits them): it hands them the functions it creates, and migration 031 takes back the
# application's membership that migration 006 granted.
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname agent_memory <<'EOSQL'
CREATE EXTENSION IF NOT EXISTS vector;
SELECT 'CREATE ROLE agent_memory_key_rotator NOLOGIN NOSUPERUSER NOBYPASSRLS'
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'agent_memory_key_rotator')\gexec
SELECT 'CREATE ROLE agent_memory_maintainer NOLOGIN NOSUPERUSER NOBYPASSRLS'
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'agent_memory_maintainer')\gexec
GRANT agent_memory_key_rotator TO agent_memory_owner WITH ADMIN TRUE, INHERIT FALSE, SET TRUE;
GRANT agent_memory_maintainer TO agent_memory_owner WITH ADMIN TRUE, INHERIT FALSE, SET TRUE;
GRANT MAINTAIN ON pg_catalog.pg_statistic TO agent_memory_maintainer;
EOSQL
