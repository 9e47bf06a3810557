"""Network addresses as users type them (``127.0.0.1:8000``, ``[::1]:8000``, ``:8000``), checked once.

Used by ``apex mcp serve --http`` and the scripted model endpoint, so a typo is a one-line error
before anything binds a socket.
"""

from __future__ import annotations

import ipaddress

from pydantic import BaseModel

from apex_core.errors import ApexUserError

LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


class HostPort(BaseModel):
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        if self.host in LOOPBACK_NAMES:
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def url(self, path: str = "") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"


def parse_host_port(text: str, default_host: str = "127.0.0.1") -> HostPort:
    """``HOST:PORT`` (IPv6 in brackets); an empty host means loopback, port 0 means any free port."""
    value = text.strip()
    if value.startswith("["):
        host, bracket, rest = value[1:].partition("]")
        if not bracket or not rest.startswith(":"):
            raise ApexUserError(f"{text!r} is not HOST:PORT; write IPv6 hosts in brackets, e.g. [::1]:8000")
        port_text = rest[1:]
    else:
        host, colon, port_text = value.rpartition(":")
        if not colon:
            raise ApexUserError(f"{text!r} is not HOST:PORT; e.g. 127.0.0.1:8000 (loopback) or 0.0.0.0:8000 (every interface)")
        if ":" in host:
            raise ApexUserError(f"{text!r}: write IPv6 hosts in brackets, e.g. [::1]:8000")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ApexUserError(f"{text!r}: the port must be a number from 0 to 65535")
    host = host or default_host
    if any(c.isspace() for c in host) or "/" in host:
        raise ApexUserError(f"{text!r}: {host!r} is not a host name or address")
    return HostPort(host=host, port=int(port_text))
