"""Python SDK: drive any Wire engine (soulwire or `kimi --wire`) over stdio."""
