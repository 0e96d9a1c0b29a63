"""Tools the model can call: the tool protocol and context, the toolset, built-in tools and
client-provided (external) tools."""
