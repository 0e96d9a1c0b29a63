"""`soulwire serve`: many sessions' runtimes in one process, Wire over WebSocket (with `seq`,
attach, controller/observer roles and request deadlines) and an HTTP API, guarded by a token
and Host/Origin checks. Imported only by `soulwire serve`, never on the `--wire` path."""
