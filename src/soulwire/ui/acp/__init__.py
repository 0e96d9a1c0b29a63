"""`soulwire acp`: the Agent Client Protocol front end that editors host (Zed, JetBrains,
Neovim, VS Code). It translates engine events into ACP `session/update`s and ACP requests
into runtime calls; the agent itself is the same engine every other mode runs."""
