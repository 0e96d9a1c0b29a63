"""Front ends: they translate engine events for a client; they hold no agent logic."""
