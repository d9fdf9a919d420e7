"""Typed settings of the registry service (the CLI builds them; tokens come from the env)."""

from __future__ import annotations

import ipaddress
from typing import Self
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from node.urls import http_url

MIB = 1024 * 1024


class Upstream(BaseModel):
    """A registry this one forwards searches to (see :mod:`node.registry.federation`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str
    """Base URL of the upstream registry (absolute http(s), no credentials, query or fragment)."""
    token: SecretStr | None = None
    """Bearer token sent to this upstream only (the CLI reads it from the environment)."""

    @field_validator("url")
    @classmethod
    def _absolute(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream url must be an absolute http(s) URL, got {value[:200]!r}")
        if parts.username is not None or parts.password is not None:
            raise ValueError("upstream url must not carry credentials; give a token instead")
        if parts.query or parts.fragment:
            raise ValueError("upstream url must be a base URL, without query or fragment")
        return value.rstrip("/")


class FederationSettings(BaseModel):
    """Upstream registries and the bounds on asking them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    upstreams: tuple[Upstream, ...] = ()
    max_hops: int = Field(default=3, ge=1, le=16)
    """Most registries a forwarded search may pass through (a caller may only lower it)."""
    timeout_s: float = Field(default=3.0, gt=0, le=60)
    """Longest wait for the upstreams of one search (a caller's hop deadline may shorten it)."""
    cache_s: float = Field(default=10.0, ge=0, le=3600)
    """Seconds an upstream's answer (or failure) to one query is reused."""
    cache_entries: int = Field(default=256, ge=1, le=100_000)
    max_results: int = Field(default=200, ge=1, le=10_000)
    """Most entries read from each upstream for one query."""
    max_answer_bytes: int = Field(default=8 * MIB, gt=0)
    """Largest upstream answer page read."""


class RegistrySettings(BaseModel):
    """Everything the registry needs to run. Explicit arguments; no environment reads here."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8700, ge=0, le=65535)
    grpc_port: int | None = Field(default=None, ge=0, le=65535)
    """Also serve the A2A endpoint over gRPC on this port of ``host`` (0: a free one); off: None."""
    public_url: str | None = None
    """Base URL published in the registry's own agent card (default ``http://host:port``)."""
    db: str = "registry.db"
    """A SQLite file path, or a SQLAlchemy async URL such as ``postgresql+asyncpg://...``."""
    token: SecretStr | None = None
    """Bearer token required for writes (POST, PUT, DELETE); ``None`` leaves writes open."""
    read_token: SecretStr | None = None
    """Extra token accepted for reads when ``read_token_required`` (so is the write token)."""
    read_token_required: bool = False
    ttl_s: float = Field(default=30.0, gt=0)
    evict_after_s: float | None = None
    """Seconds without a heartbeat before an entry is deleted (default ``3 * ttl_s``)."""
    sweep_interval_s: float | None = None
    """Seconds between eviction sweeps (default ``ttl_s / 2``)."""
    heartbeat_flush_s: float | None = Field(default=None, gt=0, le=10)
    """Seconds between writes of the heartbeats batched in memory, one statement per write
    (default 1 s, or ``ttl_s / 4`` when that is shorter)."""
    known_agents: int = Field(default=100_000, ge=0, le=10_000_000)
    """Agents whose entries this replica keeps for heartbeats (least recently used dropped; about
    2.7 kB each with a few skills). Size it for the fleet: when more agents beat than this, each
    heartbeat reads its row again (:mod:`node.registry.known`); 0 reads every time."""
    allow_cidrs: tuple[str, ...] = ()
    """Private networks the card fetcher may reach, e.g. ``("127.0.0.0/8", "::1/128")``."""
    max_card_bytes: int = Field(default=256 * 1024, gt=0)
    fetch_timeout_s: float = Field(default=5.0, gt=0)
    fetch_concurrency: int = Field(default=64, ge=1, le=4096)
    """Most card fetches in flight at once (registrations and imports together)."""
    fetch_per_host: int = Field(default=16, ge=1, le=4096)
    """Most card fetches in flight to one host (scheme, host, port)."""
    fetch_queue_s: float = Field(default=2.0, ge=0, le=60)
    """How long a registration waits for a fetch slot before 503 (all busy) or 429 (its host)."""
    import_max_urls: int = Field(default=1000, ge=1, le=100_000)
    """Most card URLs in one ``POST /v1/agents:import`` batch."""
    max_body_bytes: int = Field(default=MIB, gt=0)
    federation: FederationSettings = FederationSettings()
    """Upstream registries that complete searches this one cannot satisfy alone."""
    metrics: bool = True
    """Serve Prometheus metrics at ``GET /metrics`` (a read: the read token when required)."""
    a2a_v0_3: bool = True
    """Also serve A2A 0.3 on the registry's A2A endpoint (0.3 methods, 0.3 card fields); off: a
    strict A2A 1.0 card (see :mod:`node.server.v0_3`)."""

    @field_validator("allow_cidrs")
    @classmethod
    def _cidrs_parse(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for cidr in value:
            ipaddress.ip_network(cidr, strict=False)
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.evict_after_s is not None and self.evict_after_s < self.ttl_s:
            raise ValueError("evict_after_s must be >= ttl_s")
        if self.heartbeat_flush_s is not None and 2 * self.heartbeat_flush_s >= self.ttl_s:
            raise ValueError("heartbeat_flush_s must be less than half of ttl_s")
        if self.read_token_required and self.token is None and self.read_token is None:
            raise ValueError("read_token_required needs token or read_token")
        return self

    @property
    def evict_after(self) -> float:
        return self.evict_after_s if self.evict_after_s is not None else 3 * self.ttl_s

    @property
    def heartbeat_flush(self) -> float:
        if self.heartbeat_flush_s is not None:
            return self.heartbeat_flush_s
        return min(1.0, self.ttl_s / 4)

    @property
    def sweep_interval(self) -> float:
        return self.sweep_interval_s if self.sweep_interval_s is not None else self.ttl_s / 2

    @property
    def base_url(self) -> str:
        return (self.public_url or http_url(self.host, self.port)).rstrip("/")

    @property
    def db_url(self) -> str:
        """The SQLAlchemy URL for ``db`` (a bare path means a SQLite file)."""
        return self.db if "://" in self.db else f"sqlite+aiosqlite:///{self.db}"
