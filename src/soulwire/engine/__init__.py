"""The soul: turn/step loop, context and token accounting, approvals broker, event bus."""
