"""Importable test helpers (never collected): the in-process harness, the scripted HTTP server,
the MCP app served over it, and real processes. Tests import from here, never from each other."""
