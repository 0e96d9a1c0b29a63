"""LLM providers: the provider protocol, history messages, error taxonomy, adapters."""
