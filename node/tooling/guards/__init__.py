"""Guards shared by every tool: workspace-confined paths and the SSRF guard for URLs."""

from __future__ import annotations

from node.tooling.guards.paths import Workspace, atomic_write
from node.tooling.guards.urls import FetchResponse, UrlGuard, is_public_address

__all__ = ["FetchResponse", "UrlGuard", "Workspace", "atomic_write", "is_public_address"]
