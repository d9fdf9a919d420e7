"""http_url: the one place a bind address becomes a URL."""

from __future__ import annotations

import pytest

from node.urls import http_url, url_host


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8080"),
        ("localhost", "http://localhost:8080"),
        ("::1", "http://[::1]:8080"),
        ("[::1]", "http://[::1]:8080"),
    ],
)
def test_http_url_brackets_ipv6_literals(host: str, url: str) -> None:
    assert http_url(host, 8080) == url


def test_url_host_leaves_names_alone() -> None:
    assert url_host("node.example") == "node.example"
