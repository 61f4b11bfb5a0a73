-- The application role checks at start that the schema is current (agent-memory migrate applies
-- migrations as the owner; the app role and the worker never do): it reads the applied names.
GRANT SELECT ON schema_migrations TO agent_memory_app;
