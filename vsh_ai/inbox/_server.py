"""Serving the inbox with uvicorn on a socket this module binds (port 0: a free one)."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn
from starlette.applications import Starlette

__all__ = ("InboxServer",)


class InboxServer:
    """uvicorn serving ``app`` on ``host:port``, in the foreground or in a thread."""

    def __init__(self, app: Starlette, *, host: str = "127.0.0.1", port: int = 0) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        self.socket.listen(128)  # connections queue until uvicorn accepts them
        self.host = host
        self.port: int = self.socket.getsockname()[1]
        # proxy_headers=False: the client address (login throttle, logs) is the socket's
        # peer; any local client can write X-Forwarded-For, so it is never trusted.
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off", proxy_headers=False
        )
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def run(self) -> None:
        """Serve until interrupted (Ctrl-C)."""
        self.server.run(sockets=[self.socket])

    def start(self) -> InboxServer:
        """Serve in a daemon thread; returns once the server accepts connections."""
        self._thread = threading.Thread(target=self.run, name="vsh-ai-inbox", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the inbox server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.socket.close()
