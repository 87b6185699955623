"""A loopback server that accepts every connection and never answers: an object store endpoint that hangs."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def silent_server() -> Iterator[tuple[str, list[socket.socket]]]:
    """``http://127.0.0.1:PORT`` of a loopback server (a thread) that accepts and never answers, and the
    connections it accepted (kept open, never read)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", held
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()
