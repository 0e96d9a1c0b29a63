"""Print mode: one-shot prompts without a client."""
