"""MCP Streamable HTTP over one transport: requests and replies, the GET stream, the MCP session."""
