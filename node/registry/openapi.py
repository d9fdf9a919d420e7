"""The OpenAPI 3.1 description of the registry's REST API, written as data."""

from __future__ import annotations

from typing import Any

from node.protocol import AGENT_ID_PATTERN
from node.registry.cards import MAX_NAME_CHARS, MAX_SKILL_TEXT_CHARS, MAX_URL_BYTES
from node.registry.errors import ERROR_TABLE
from node.registry.federation import HOP_HEADER, SCOPES
from node.registry.safejson import MAX_DEPTH
from node.registry.service import (
    DEFAULT_PAGE_SIZE,
    MAX_PAGE_SIZE,
    MAX_QUERY_CHARS,
    MAX_TOKEN_CHARS,
)
from node.registry.settings import RegistrySettings


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    return {str(s): {"$ref": f"#/components/responses/E{s}"} for s in statuses}


_ID = {
    "name": "id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": AGENT_ID_PATTERN.pattern},
}
_UNREADABLE = {
    "type": "integer",
    "minimum": 0,
    "description": "stored entries left out of every listing because they cannot be read or "
    "served (logged by the registry; GET/PUT on their id answer 404 unreadable_entry)",
}
_JSON_RULES = (
    f"JSON bodies and cards: UTF-8, finite numbers (no NaN/Infinity/1e400), nesting at most "
    f"{MAX_DEPTH} deep, no NUL characters or unpaired surrogates in strings."
)
_STRING = {"type": "string"}
_TIME = {"type": "string", "format": "date-time"}

_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message"],
                "properties": {
                    "code": {
                        "type": "string",
                        "enum": sorted({c for _, c in ERROR_TABLE.values()}),
                    },
                    "message": _STRING,
                },
            }
        },
    },
    "Skill": {
        "type": "object",
        "required": ["id", "name", "description", "tags"],
        "properties": {
            "id": _STRING,
            "name": _STRING,
            "description": _STRING,
            "tags": {"type": "array", "items": _STRING},
        },
    },
    "Agent": {
        "type": "object",
        "required": [
            "id",
            "name",
            "description",
            "card_url",
            "skills",
            "healthy",
            "registered_at",
            "last_heartbeat",
            "expires_at",
        ],
        "properties": {
            "id": _STRING,
            "name": _STRING,
            "description": _STRING,
            "card_url": {"type": "string", "format": "uri"},
            "skills": {"type": "array", "items": _ref("Skill")},
            "healthy": {"type": "boolean", "description": "a heartbeat arrived within the TTL"},
            "registered_at": _TIME,
            "last_heartbeat": _TIME,
            "expires_at": {**_TIME, "description": "healthy until then without a new heartbeat"},
            "card": {"type": "object", "description": "the A2A agent card as fetched"},
            "registry": {
                "type": "string",
                "description": "only on entries from an upstream: the registry that holds it",
            },
        },
    },
    "AgentList": {
        "type": "object",
        "required": ["agents", "next_page_token"],
        "properties": {
            "agents": {"type": "array", "items": _ref("Agent")},
            "next_page_token": {
                "type": ["string", "null"],
                "description": "fed.<offset> once the listing goes on with upstream entries",
            },
            "unreadable": _UNREADABLE,
            "federation": _ref("Federation"),
        },
    },
    "Federation": {
        "type": "object",
        "description": "on pages completed by upstream registries: how each one answered",
        "required": ["upstreams", "not_forwarded"],
        "properties": {
            "upstreams": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["url", "agents", "cached", "error"],
                    "properties": {
                        "url": _STRING,
                        "agents": {"type": "integer", "minimum": 0},
                        "cached": {"type": "boolean"},
                        "error": {"type": ["string", "null"], "maxLength": 200},
                    },
                },
            },
            "not_forwarded": {
                "type": ["string", "null"],
                "description": "why the upstreams were not asked (loop, hop limit, deadline)",
            },
        },
    },
    "RegisterRequest": {
        "type": "object",
        "required": ["card_url"],
        "properties": {
            "card_url": {
                "type": "string",
                "format": "uri",
                "description": f"absolute http(s) URL, at most {MAX_URL_BYTES} bytes of UTF-8, "
                "no credentials or control characters",
            }
        },
    },
    "ImportRequest": {
        "type": "object",
        "required": ["card_urls"],
        "properties": {
            "card_urls": {
                "type": "array",
                "minItems": 1,
                "items": {"type": "string"},
                "description": "card URLs (each as card_url in RegisterRequest); at most "
                "import_max_urls of them (default 1000)",
            }
        },
    },
    "ImportResult": {
        "type": "object",
        "required": ["results", "registered", "unchanged", "errors"],
        "properties": {
            "results": {
                "type": "array",
                "description": "one per card_urls entry, in order",
                "items": {
                    "type": "object",
                    "required": ["card_url", "status"],
                    "properties": {
                        "card_url": {"description": "the entry as sent"},
                        "status": {"enum": ["registered", "unchanged", "error"]},
                        "id": {"type": "string", "description": "the agent id"},
                        "error": {
                            "type": "object",
                            "required": ["code", "status", "message"],
                            "properties": {
                                "code": _STRING,
                                "status": {
                                    "type": "integer",
                                    "description": "the status POST /v1/agents would answer",
                                },
                                "message": _STRING,
                            },
                        },
                    },
                },
            },
            "registered": {"type": "integer"},
            "unchanged": {"type": "integer"},
            "errors": {"type": "integer"},
        },
    },
    "Health": {
        "type": "object",
        "required": ["status", "agents"],
        "properties": {
            "status": {"const": "ok"},
            "agents": {"type": "integer"},
            "unreadable": _UNREADABLE,
        },
    },
}

_TEXT_PARAM = {"type": "string", "maxLength": MAX_QUERY_CHARS}
_QUERY = [
    {"name": "skill", "in": "query", "schema": _TEXT_PARAM, "description": "skill id (exact)"},
    {"name": "tag", "in": "query", "schema": _TEXT_PARAM, "description": "skill tag (exact)"},
    {
        "name": "q",
        "in": "query",
        "schema": _TEXT_PARAM,
        "description": "case-insensitive text in name, description, skill names/descriptions/tags",
    },
    {"name": "healthy", "in": "query", "schema": {"type": "boolean"}},
    {
        "name": "page_size",
        "in": "query",
        "schema": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_PAGE_SIZE,
            "default": DEFAULT_PAGE_SIZE,
        },
    },
    {
        "name": "page_token",
        "in": "query",
        "schema": {"type": "string", "maxLength": MAX_TOKEN_CHARS},
        "description": "opaque cursor",
    },
    {"name": "include_card", "in": "query", "schema": {"type": "boolean", "default": False}},
    {
        "name": "scope",
        "in": "query",
        "schema": {"enum": list(SCOPES)},
        "description": "local: this registry only; federated: also ask the upstream registries "
        "after the last local page; absent: ask them when the last local page is short",
    },
    {
        "name": HOP_HEADER,
        "in": "header",
        "schema": {"type": "string", "maxLength": 4096},
        "description": 'set by a forwarding registry: JSON {"chain": [registry ids], '
        '"max_hops": int, "deadline": epoch seconds}; a registry in the chain, at max_hops or '
        "past the deadline answers with its own agents only",
    },
    {
        "name": "If-None-Match",
        "in": "header",
        "schema": _STRING,
        "description": "the ETag of the page held: 304 with no body when it is unchanged",
    },
]


def openapi_document(settings: RegistrySettings) -> dict[str, Any]:
    """The OpenAPI document served at ``GET /v1/openapi.json``."""
    write_security: list[dict[str, list[str]]] = [{"bearer": []}] if settings.token else []
    read_security: list[dict[str, list[str]]] = (
        [{"bearer": []}] if settings.read_token_required else []
    )
    responses = {
        f"E{status}": _json(_ref("Error"), description)
        for status, description in (
            (400, "bad request"),
            (401, "missing bearer token"),
            (403, "wrong bearer token"),
            (
                404,
                "no such agent (not_found), or its stored entry is unreadable (unreadable_entry)",
            ),
            (409, "agent id already registered from another card URL"),
            (413, "request body too large"),
            (415, "the request body is not declared as application/json"),
            (422, "the card could not be fetched or is invalid"),
            (429, "every card-fetch slot for this host stayed taken (see Retry-After)"),
            (503, "every card-fetch slot stayed taken (see Retry-After)"),
        )
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "a2a-node registry",
            "version": "1",
            "description": (
                f"{_JSON_RULES} Query parameters: only the documented ones, each at most once; "
                f"text parameters at most {MAX_QUERY_CHARS} characters, page_token at most "
                f"{MAX_TOKEN_CHARS}, never a NUL. Cards: name at most {MAX_NAME_CHARS} "
                f"characters, skill ids and tags at most {MAX_SKILL_TEXT_CHARS}. Unknown paths "
                "and methods answer 404/405 (no redirects); every error is an Error object."
            ),
        },
        "servers": [{"url": settings.base_url}],
        "paths": {
            "/healthz": {
                "get": {
                    "operationId": "health",
                    "responses": {"200": _json(_ref("Health"), "alive")},
                }
            },
            **(
                {
                    "/metrics": {
                        "get": {
                            "operationId": "metrics",
                            "description": (
                                "Prometheus text format: agents by health, heartbeats, "
                                "registrations (setting metrics); same auth as /v1 reads"
                            ),
                            "responses": {
                                "200": {
                                    "description": "metrics",
                                    "content": {"text/plain": {"schema": {"type": "string"}}},
                                }
                            },
                        }
                    }
                }
                if settings.metrics
                else {}
            ),
            "/ui": {
                "get": {
                    "operationId": "console",
                    "description": "the web console (static page; its data calls use this API)",
                    "responses": {"308": {"description": "to /ui/"}},
                }
            },
            "/ui/config.json": {
                "get": {
                    "operationId": "consoleConfig",
                    "description": "what the console page needs to know (role, refresh period)",
                    "responses": {"200": _json({"type": "object"}, "console settings")},
                }
            },
            "/v1/openapi.json": {
                "get": {
                    "operationId": "openapi",
                    "responses": {"200": _json({"type": "object"}, "this document")},
                }
            },
            "/.well-known/agent-card.json": {
                "get": {
                    "operationId": "agentCard",
                    "description": "the registry's own A2A agent card (skill find_agents)",
                    "responses": {"200": _json({"type": "object"}, "A2A agent card")},
                }
            },
            "/v1/agents": {
                "post": {
                    "operationId": "registerAgent",
                    "description": "Fetch and check the card at card_url; register or update it.",
                    "security": write_security,
                    "requestBody": {"required": True, **_json(_ref("RegisterRequest"), "card URL")},
                    "responses": {
                        "201": _json(_ref("Agent"), "registered"),
                        "200": _json(_ref("Agent"), "updated (same card_url)"),
                        **_errors(400, 401, 403, 409, 413, 415, 422, 429, 503),
                    },
                },
                "get": {
                    "operationId": "searchAgents",
                    "security": read_security,
                    "parameters": _QUERY,
                    "responses": {
                        "200": {
                            **_json(_ref("AgentList"), "one page"),
                            "headers": {"ETag": {"schema": _STRING}},
                        },
                        "304": {"description": "not modified (If-None-Match held the ETag)"},
                        **_errors(400, 401, 403),
                    },
                },
            },
            "/v1/agents:import": {
                "post": {
                    "operationId": "importAgents",
                    "description": "Register a batch of card URLs: the registry fetches them "
                    "(bounded concurrency, per-host limits, conditional requests), checks each "
                    "card as registerAgent does and stores the batch in one transaction. A bad "
                    "URL or card is an error entry of its own; the others are registered.",
                    "security": write_security,
                    "requestBody": {"required": True, **_json(_ref("ImportRequest"), "card URLs")},
                    "responses": {
                        "200": _json(_ref("ImportResult"), "one result per URL"),
                        **_errors(400, 401, 403, 413, 415, 503),
                    },
                },
            },
            "/v1/agents/{id}": {
                "parameters": [_ID],
                "get": {
                    "operationId": "getAgent",
                    "security": read_security,
                    "responses": {
                        "200": _json(_ref("Agent"), "the entry, card included"),
                        **_errors(400, 401, 403, 404),
                    },
                },
                "delete": {
                    "operationId": "deregisterAgent",
                    "security": write_security,
                    "description": "Deregister; also deletes an unreadable stored entry.",
                    "responses": {
                        "204": {"description": "deregistered"},
                        **_errors(400, 401, 403, 404),
                    },
                },
            },
            "/v1/agents/{id}/heartbeat": {
                "parameters": [_ID],
                "put": {
                    "operationId": "heartbeat",
                    "security": write_security,
                    "responses": {
                        "200": _json(_ref("Agent"), "alive until expires_at"),
                        **_errors(400, 401, 403, 404),
                    },
                },
            },
        },
        "components": {
            "schemas": _SCHEMAS,
            "responses": responses,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }
