"""The registry service: agents register by card URL, heartbeat, and are found by skill/tag/text."""

from __future__ import annotations

from node.registry.app import build_registry_app, serve_registry
from node.registry.settings import RegistrySettings

__all__ = ["RegistrySettings", "build_registry_app", "serve_registry"]
