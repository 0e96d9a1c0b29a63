"""A stand-in for a `soulwire serve` that hangs: it starts like one (`--processes N` ports,
each announced with the `listening on` line a fleet waits for), completes every WebSocket
handshake, then never says a word. It exits when its stdin closes (`--exit-with-stdin`)."""

from __future__ import annotations

import base64
import hashlib
import socket
import sys
import threading

_WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def _hold(connection: socket.socket) -> None:
    request = b""
    while b"\r\n\r\n" not in request:
        chunk = connection.recv(4096)
        if not chunk:
            return
        request += chunk
    key = ""
    for line in request.decode("latin-1").split("\r\n"):
        name, _, value = line.partition(":")
        if name.strip().lower() == "sec-websocket-key":
            key = value.strip()
    accept = base64.b64encode(hashlib.sha1((key + _WS_GUID).encode()).digest()).decode()
    connection.sendall(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + f"Sec-WebSocket-Accept: {accept}\r\n\r\n".encode()
    )
    while connection.recv(4096):  # read and ignore everything: the hang
        pass


def _serve(listener: socket.socket) -> None:
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=_hold, args=(connection,), daemon=True).start()


def main() -> None:
    argv = sys.argv[1:]
    copies = int(argv[argv.index("--processes") + 1]) if "--processes" in argv else 1
    for _ in range(copies):
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        sys.stderr.write(f"soulwire serve: listening on http://127.0.0.1:{port}\n")
        threading.Thread(target=_serve, args=(listener,), daemon=True).start()
    sys.stderr.flush()
    sys.stdin.buffer.read()  # until the fleet closes our stdin


if __name__ == "__main__":
    main()
