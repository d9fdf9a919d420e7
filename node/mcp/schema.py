"""Input schemas of MCP tools, normalised for the node's validator.

MCP servers write JSON Schema in several dialects. :func:`normalise_schema` returns a private
copy the node's catalog can compile and a card can publish:

- the root is an object schema (``{"type": "object"}`` is added when missing);
- ``definitions`` move into ``$defs`` and their ``#/definitions/...`` references follow;
- OpenAPI's ``nullable: true`` becomes a union with ``"null"``;
- ``$schema`` / ``$id`` are dropped (an ``$id`` would change how references resolve);
- any reference that is not local (``#/...``) or does not resolve is a :class:`ConfigError`:
  the node never fetches a schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from node.errors import ConfigError

__all__ = ["normalise_schema"]


def normalise_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """A normalised, JSON-only copy of an MCP tool's ``inputSchema``."""
    try:
        root: Any = json.loads(json.dumps(dict(schema or {})))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"input schema is not JSON: {exc}") from exc
    root.pop("$schema", None)
    root.pop("$id", None)
    definitions = root.pop("definitions", None)
    if isinstance(definitions, dict):
        root["$defs"] = {**definitions, **(root.get("$defs") or {})}
    root.setdefault("type", "object")
    if root.get("type") != "object":
        raise ConfigError(f"input schema must describe an object, not {root.get('type')!r}")
    _walk(root, root)
    return dict(root)


def _walk(node: Any, root: dict[str, Any]) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, root)
        return
    if not isinstance(node, dict):
        return
    ref = node.get("$ref")
    if ref is not None:
        node["$ref"] = ref = _local_ref(ref, root)
    if node.pop("nullable", False) is True:
        kind = node.get("type")
        if isinstance(kind, str) and kind != "null":
            node["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            node["type"] = [*kind, "null"]
        elif kind is None and ref is not None:
            node.pop("$ref")
            node["anyOf"] = [{"$ref": ref}, {"type": "null"}]
    for key, value in node.items():
        if key not in ("enum", "const", "default", "examples"):
            _walk(value, root)


def _local_ref(given: Any, root: dict[str, Any]) -> str:
    if not isinstance(given, str) or not given.startswith("#"):
        raise ConfigError(f"only local $ref ('#/...') are allowed, got {given!r}")
    ref = given
    if ref.startswith("#/definitions/"):
        ref = "#/$defs/" + ref[len("#/definitions/") :]
    target: Any = root
    for part in ref[2:].split("/") if ref not in ("#", "#/") else []:
        part = part.replace("~1", "/").replace("~0", "~")
        target = target.get(part) if isinstance(target, dict) else None
        if target is None:
            raise ConfigError(f"$ref {ref!r} does not resolve")
    return ref
