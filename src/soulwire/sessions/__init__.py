"""Session persistence: the share-dir layout, `context.jsonl`, `wire.jsonl` and state."""
