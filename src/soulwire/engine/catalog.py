"""The built-in slash commands as the client sees them (name, description, aliases), in the
order they are reported. Kept free of heavy imports: the start-up path reports them before
the engine is loaded. `slash.py` binds a handler to every entry (a test keeps them in step)."""

BUILTIN_SLASH_COMMANDS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("init", "Analyse the project and write an AGENTS.md file for agents", ()),
    ("compact", "Summarise the context to free space; optional text says what to focus on", ()),
    ("clear", "Clear the context", ("reset",)),
    ("yolo", "Toggle auto-approval of tool actions", ()),
)


def describe_builtin() -> list[dict[str, object]]:
    return [{"name": n, "description": d, "aliases": list(a)} for n, d, a in BUILTIN_SLASH_COMMANDS]
