"""The sans-I/O core: standard library only, no ``await`` (tests/test_layout.py keeps it so).
Configuration, the error table, framing, JSON-RPC, each request's era, the recovery policy,
the reply ledger, backpressure budgets and the SSE decoder."""
