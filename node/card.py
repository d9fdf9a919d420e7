"""The card: everything a node is, parsed once from one YAML file and validated with pydantic.

A card file holds the public card fields, the tools the node loads (and which are public skills),
its store, auth, limits, network policy and peers. ``${VAR}`` / ``${VAR:-default}`` in any string
value is replaced from the environment at load time; secrets therefore live only in the environment
and in :class:`pydantic.SecretStr` fields, never in the served card or in logs.

``cards/card.schema.json`` is :func:`card_json_schema` written out, for editors.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)

from node.errors import ConfigError
from node.peers.settings import PeersSettings
from node.pipeline.spec import PipelineSpec
from node.planning.settings import PlannerSettings, RoutingSettings
from node.protocol import AGENT_ID_PATTERN
from node.tooling.tool import TOOL_NAME_PATTERN, ToolPolicy

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Provider(_Model):
    organization: str
    url: str


_POLICY = ToolPolicy()  # the defaults of a tool's policy


class PolicyOverrides(_Model):
    """Fields of a tool's :class:`ToolPolicy` a card overrides (unset: the tool's own)."""

    scope: Literal["public", "internal"] | None = None
    requires: list[str] | None = None
    timeout: float | None = Field(default=None, gt=0)
    max_output: int | None = Field(default=None, gt=0)
    cost: float | None = Field(default=None, ge=0)
    tags: list[str] | None = None
    examples: list[str] | None = None

    def apply(self, policy: ToolPolicy) -> ToolPolicy:
        """``policy`` with every set field replaced (the same object when none is set)."""
        changes = {
            key: value
            for key in PolicyOverrides.model_fields
            if (value := getattr(self, key)) is not None
        }
        return dataclasses.replace(policy, **changes) if changes else policy


class ToolRef(PolicyOverrides):
    """Load a built-in or plugin tool by name, optionally overriding its policy."""

    name: str = Field(pattern=TOOL_NAME_PATTERN.pattern)


class DeclaredTool(_Model):
    """A schema-first tool declared in YAML, backed by an HTTP endpoint or a command line.

    The policy fields are those of :class:`ToolPolicy`, with its defaults.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    name: str = Field(pattern=TOOL_NAME_PATTERN.pattern)
    description: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    http: dict[str, Any] | None = None
    command: list[str] | None = None
    read_only: bool = _POLICY.read_only
    exclusive: bool = _POLICY.exclusive
    scope: Literal["public", "internal"] = _POLICY.scope
    requires: list[str] = Field(default_factory=list)
    timeout: float = Field(default=_POLICY.timeout, gt=0)
    max_output: int = Field(default=_POLICY.max_output, gt=0)
    cost: float = Field(default=_POLICY.cost, ge=0)
    tags: list[str] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)

    def model_post_init(self, _context: Any) -> None:
        if (self.http is None) == (self.command is None):
            raise ValueError(f"tool {self.name!r}: declare exactly one of 'http' or 'command'")


class McpToolRef(PolicyOverrides):
    """Policy overrides for one tool of an MCP server, named as the server names it."""

    name: str = Field(min_length=1, max_length=128)


class McpServer(_Model):
    """An MCP server whose tools become the node's: a command (stdio) or a URL (streamable HTTP).

    Its tools are ``mcp_<name>_<tool>`` and internal unless ``tools`` makes one public.
    Secrets go in ``env`` / ``headers`` as ``${VAR}``; they are never shown.
    """

    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,24}$")
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, SecretStr] = Field(default_factory=dict)
    env_passthrough: list[str] = Field(
        default_factory=list,
        description="Names of the node's environment variables the server inherits (beside "
        "HOME, PATH, USER, SHELL, TERM, LOGNAME).",
    )
    cwd: str | None = None
    url: str | None = Field(default=None, pattern=r"^https?://")
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    enabled_tools: list[str] | None = Field(
        default=None, description="The server's tools to use (default: all)."
    )
    timeout_s: float = Field(default=30.0, gt=0, description="Default timeout of a call.")
    connect_timeout_s: float = Field(default=15.0, gt=0)
    protocol: Literal["auto", "legacy"] = Field(
        default="auto", description="'legacy' skips the 2026 discovery probe (older servers)."
    )
    requires: list[str] = Field(default_factory=list, description="Capabilities for every tool.")
    tools: list[McpToolRef] = Field(default_factory=list)

    def model_post_init(self, _context: Any) -> None:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"mcp server {self.name!r}: give exactly one of 'command' or 'url'")
        if self.url is not None and (self.args or self.env or self.cwd or self.env_passthrough):
            raise ValueError(f"mcp server {self.name!r}: args, env and cwd need a 'command'")
        if self.command is not None and self.headers:
            raise ValueError(f"mcp server {self.name!r}: headers need a 'url'")


class McpEndpoint(_Model):
    """Serving the node's public skills as MCP tools over streamable HTTP at ``/mcp``."""

    enabled: bool = False


class Credential(_Model):
    """One API key or bearer token, the principal it authenticates, and what it is granted."""

    secret: SecretStr = Field(
        description="The key or token (8+ characters); write it as ${ENV_VAR}."
    )
    principal: str = Field(min_length=1, max_length=64)
    capabilities: list[str] = Field(default_factory=list)

    @field_validator("secret")
    @classmethod
    def _long_enough(cls, secret: SecretStr) -> SecretStr:
        if len(secret.get_secret_value()) < 8:
            raise ValueError("a key or token must have at least 8 characters (is its ${VAR} set?)")
        return secret


class AuthSettings(_Model):
    api_keys: list[Credential] = Field(default_factory=list)
    bearer_tokens: list[Credential] = Field(default_factory=list)
    api_key_header: str = "X-API-Key"
    anonymous_capabilities: list[str] = Field(
        default_factory=list, description="Capabilities granted to every caller when auth is off."
    )

    @property
    def enabled(self) -> bool:
        return bool(self.api_keys or self.bearer_tokens)


class Limits(_Model):
    max_body_bytes: int = Field(default=1_048_576, gt=0)
    max_calls_per_task: int = Field(default=16, gt=0)
    task_cost_budget: float | None = Field(default=None, gt=0)
    interrupted_task_timeout_s: float = Field(default=600.0, gt=0)
    send_window_s: float = Field(
        default=86_400.0,
        gt=0,
        description="How long a message id keeps naming the task it created: a SendMessage "
        "retried with the same messageId within this window returns that task.",
    )


class NetworkPolicy(_Model):
    """Which non-public address ranges the node's URL fetches may reach (e.g. 127.0.0.0/8)."""

    allow_cidrs: list[str] = Field(default_factory=list)


class PushSettings(_Model):
    """Push notifications: webhooks per task, delivered in the background (never slowing it).

    Webhook URLs pass the same SSRF guard as ``http_fetch`` (``network.allow_cidrs`` included),
    when a config is created and again at each delivery.
    """

    enabled: bool = Field(default=True, description="Off: push configs are refused (-32003).")
    timeout_s: float = Field(default=10.0, gt=0, le=120, description="Bound of one delivery.")
    max_attempts: int = Field(default=5, ge=1, le=20, description="Tries per event and webhook.")
    backoff_s: float = Field(default=0.5, gt=0, description="First wait between tries (doubles).")
    max_backoff_s: float = Field(default=30.0, gt=0, description="Longest wait between tries.")
    concurrency: int = Field(default=16, ge=1, le=256, description="Deliveries in flight.")
    max_pending: int = Field(
        default=10_000,
        ge=1,
        description="Events waiting for delivery; beyond, new ones are dropped.",
    )
    shutdown_grace_s: float = Field(
        default=5.0, ge=0, description="How long shutdown waits for pending deliveries."
    )


class WorkspaceSettings(_Model):
    root: str = "workspace"  # relative to the data directory
    read_roots: list[str] = Field(default_factory=list)


class ServerSettings(_Model):
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    grpc_port: int | None = Field(
        default=None,
        ge=0,
        le=65535,
        description="Also serve A2A over gRPC on this port of the same host (0 picks a free "
        "one); the card advertises it at the public URL's host. Unset: no gRPC.",
    )
    public_url: str | None = None
    a2a_v0_3: bool = Field(
        default=True,
        description="Also serve A2A 0.3 (a2a-sdk 0.3, strands, beeai, crewAI): 0.3 methods on "
        "JSON-RPC and REST, and the 0.3 fields (url, preferredTransport, protocolVersion, "
        "additionalInterfaces) on the agent card. Off: a strict A2A 1.0 card and 1.0 only.",
    )
    store: str = "sqlite"  # "memory", "sqlite", "sqlite:///path.db", "postgresql://..."
    data_dir: str = ".a2a-node"
    card_cache_s: int = Field(default=300, ge=0)
    recover_orphaned: bool = Field(
        default=True,
        validation_alias=AliasChoices("recover_orphaned", "recover_interrupted"),
        description="At start, fail the orphaned tasks a dead process left submitted or working. "
        "On a PostgreSQL store shared by replicas this runs only when no other replica is alive "
        "(the leases of running tasks cover the rest). The old key recover_interrupted is "
        "accepted (deprecated).",
    )
    task_retention_days: float | None = Field(
        default=None,
        gt=0,
        description="Delete finished tasks (completed, failed, canceled, rejected) this many "
        "days after their last change (SQLite and PostgreSQL stores, checked every minute). "
        "Unset: keep them. Event rows for streaming are always kept one hour.",
    )
    lean_path: bool = Field(
        default=True,
        description="Serve a new blocking SendMessage to cheap inline tools without the SDK's "
        "event machinery (same task, saved once). A2A_NODE_LEAN_PATH=0 turns it off too.",
    )
    metrics: bool = Field(
        default=True,
        description="Serve Prometheus metrics at GET /metrics (tasks, tool and peer calls, "
        "circuit breakers, push deliveries); it needs credentials like every route but the card "
        "and the health probes.",
    )
    log_format: Literal["text", "json"] = Field(
        default="text",
        description="Log lines as text, or one JSON object per line (task_id, context_id, "
        "trace_id, principal fields); `a2a-node serve --log-format` overrides it.",
    )


class NodeCard(_Model):
    """One node: its public card, its tools and skills, and how it runs."""

    id: str = Field(
        pattern=AGENT_ID_PATTERN.pattern, description="Stable agent id used in hop chains."
    )
    name: str = Field(min_length=1, max_length=128)
    description: str = Field(min_length=1)
    version: str = "1.0.0"
    provider: Provider | None = None
    documentation_url: str | None = None
    icon_url: str | None = None
    tools: list[str | ToolRef] = Field(default_factory=list)
    declared_tools: list[DeclaredTool] = Field(default_factory=list)
    pipelines: list[PipelineSpec] = Field(default_factory=list)
    planner: PlannerSettings | None = Field(
        default=None,
        description="Model endpoint for free-text requests; without it, plain text is routed "
        "(see routing).",
    )
    routing: RoutingSettings = Field(
        default_factory=RoutingSettings,
        description="Plain text naming no skill, without a model: default_skill, else the skill "
        "router (threshold, margin, candidates).",
    )
    server: ServerSettings = Field(default_factory=ServerSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    limits: Limits = Field(default_factory=Limits)
    network: NetworkPolicy = Field(default_factory=NetworkPolicy)
    push: PushSettings = Field(default_factory=PushSettings)
    workspace: WorkspaceSettings = Field(default_factory=WorkspaceSettings)
    peers: PeersSettings = Field(default_factory=PeersSettings)
    mcp_servers: list[McpServer] = Field(default_factory=list)
    mcp: McpEndpoint = Field(default_factory=McpEndpoint)

    @field_validator("tools")
    @classmethod
    def _unique_tools(cls, tools: list[str | ToolRef]) -> list[str | ToolRef]:
        names = [t if isinstance(t, str) else t.name for t in tools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"tools listed twice: {', '.join(dupes)}")
        return tools

    @field_validator("mcp_servers")
    @classmethod
    def _unique_mcp_servers(cls, servers: list[McpServer]) -> list[McpServer]:
        names = [s.name for s in servers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"mcp servers listed twice: {', '.join(dupes)}")
        return servers

    def tool_refs(self) -> list[ToolRef]:
        return [ToolRef(name=t) if isinstance(t, str) else t for t in self.tools]


def interpolate_env(value: Any, env: Mapping[str, str], where: str = "") -> Any:
    """Replace ``${VAR}`` and ``${VAR:-default}`` in every string of a parsed YAML tree."""
    if isinstance(value, str):

        def sub(match: re.Match[str]) -> str:
            name, default = match.group(1), match.group(2)
            if name in env:
                return env[name]
            if default is not None:
                return default
            raise ConfigError(f"{where or '<root>'}: environment variable {name} is not set")

        return _ENV_REF.sub(sub, value)
    if isinstance(value, dict):
        return {
            k: interpolate_env(v, env, f"{where}.{k}" if where else str(k))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [interpolate_env(v, env, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def parse_card(
    data: Any, *, source: str = "<card>", env: Mapping[str, str] | None = None
) -> NodeCard:
    """Validate a parsed YAML tree into a :class:`NodeCard`; errors name the source and path."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: a card must be a YAML mapping, got {type(data).__name__}")
    try:
        data = interpolate_env(data, os.environ if env is None else env)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from exc
    try:
        return NodeCard.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            path = ".".join(str(p) for p in err["loc"]) or "<root>"
            lines.append(f"{source}: {path}: {err['msg']}")
        raise ConfigError("\n".join(lines)) from exc


def load_card(path: str | Path, *, env: Mapping[str, str] | None = None) -> NodeCard:
    """Read and validate one card file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read card: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    return parse_card(data, source=str(path), env=env)


def card_json_schema() -> dict[str, Any]:
    """The JSON Schema of a card file (committed as ``cards/card.schema.json``)."""
    schema = NodeCard.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "a2a-node card"
    return schema


def card_schema_text() -> str:
    """The committed form of :func:`card_json_schema` (sorted keys, trailing newline)."""
    import json

    return json.dumps(card_json_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":  # python -m node.card > cards/card.schema.json
    print(card_schema_text(), end="")
