"""Free ports and listening checks on the server's host (loopback by default)."""

from __future__ import annotations

import ipaddress
import re
import socket

from repo_builder.errors import UserError


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True when something listens on ``port`` (connections lingering in TIME_WAIT do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


_HOSTNAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")


def check_host(host: str) -> str:
    """``host`` if it is an IP address or a well-formed host name, else a UserError.

    Only the syntax is checked (no DNS lookup: validate and serve send no traffic off the machine).
    """
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    if not _HOSTNAME.fullmatch(host):
        raise UserError(
            f"--host {host!r}: not an IP address or a host name; use e.g. 127.0.0.1 or 0.0.0.0"
        )
    return host


def check_distinct_ports(ports: dict[str, int | None]) -> None:
    """Two endpoints on one port make tritonserver spin without output: refuse it up front."""
    seen: dict[int, str] = {}
    for flag, port in ports.items():
        if port is None:
            continue
        if port in seen:
            raise UserError(f"{seen[port]} and {flag} are both {port}: give each endpoint its own port")
        seen[port] = flag
