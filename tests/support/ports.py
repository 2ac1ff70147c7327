"""A free port on the loopback address: for a server about to start there, or for a target that must
find nobody listening."""

from __future__ import annotations

import socket

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """A port of `host` that nothing listens on now, as the system picks one: free until somebody
    binds it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port
