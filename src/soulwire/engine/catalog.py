"""The built-in slash commands as the client sees them (name, description, aliases). Kept free
of heavy imports: the start-up path reports them before the engine is loaded."""

BUILTIN_SLASH_COMMANDS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("clear", "Clear the context", ("reset",)),
    ("yolo", "Toggle auto-approval of tool actions", ()),
)


def describe_builtin() -> list[dict[str, object]]:
    return [{"name": n, "description": d, "aliases": list(a)} for n, d, a in BUILTIN_SLASH_COMMANDS]
