"""The Wire front end: JSON-RPC 2.0 over stdin/stdout."""
