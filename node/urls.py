"""Building URLs from a host and a port: an IPv6 literal goes in brackets."""

from __future__ import annotations

__all__ = ["http_url", "url_host"]


def url_host(host: str) -> str:
    """``host`` as written in a URL: ``::1`` becomes ``[::1]``; names and IPv4 stay as they are."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def http_url(host: str, port: int) -> str:
    """``http://host:port`` for a bind address (``http://[::1]:8080`` for IPv6)."""
    return f"http://{url_host(host)}:{port}"
