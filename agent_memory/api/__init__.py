"""The surfaces: the Python client, the HTTP API and console, the MCP server, the codec server."""
