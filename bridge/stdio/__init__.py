"""The client's end of the wire: raw stdin/stdout file descriptors and the one stdout writer."""
