"""Peer settings embedded in a node's card: static peers, the registry link, call policy.

Tokens are never stored here: a setting names the environment variable that holds the token
(``token_env``), and :func:`read_token` reads it when a call is made, so a rotated secret is
picked up without a restart and never appears in the card, its schema or the logs.
"""

from __future__ import annotations

import ipaddress
import os

from pydantic import BaseModel, ConfigDict, Field, field_validator

from node.errors import ConfigError

__all__ = ["PeersSettings", "RegistryConnection", "StaticPeer", "read_token"]


def read_token(env_name: str | None) -> str | None:
    """The token held by the environment variable ``env_name`` (``None`` when no name is set).

    Raises :class:`ConfigError` when the variable is named but unset or empty.
    """
    if env_name is None:
        return None
    token = os.environ.get(env_name, "").strip()
    if not token:
        raise ConfigError(f"environment variable {env_name} (a peer token) is not set")
    return token


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StaticPeer(_Settings):
    """A peer named in the card: its base URL (or full card URL) and what to take from it."""

    url: str = Field(min_length=1, pattern=r"^https?://")
    token_env: str | None = None
    skills: list[str] | None = None  # only these skill ids (None: all)
    tags: list[str] | None = None  # only skills carrying one of these tags (None: all)
    expose: bool = False  # publish this peer's skills as our own (scope "public")


class RegistryConnection(_Settings):
    """The registry this node registers with and searches for peers."""

    url: str = Field(min_length=1, pattern=r"^https?://")
    token_env: str | None = None
    heartbeat_s: float = Field(default=10.0, gt=0)
    refresh_s: float = Field(default=15.0, gt=0)


class PeersSettings(_Settings):
    """Everything about peers: where to find them and how to call them."""

    static: list[StaticPeer] = Field(default_factory=list)
    registry: RegistryConnection | None = None
    max_hops: int = Field(default=4, ge=1)
    call_timeout_s: float = Field(default=30.0, gt=0)
    retries: int = Field(default=3, ge=1)  # attempts per call for transient failures
    breaker_failures: int = Field(default=5, ge=1)
    breaker_cooldown_s: float = Field(default=15.0, gt=0)
    allow_cidrs: list[str] = Field(
        default_factory=list,
        description="Non-public ranges where peers learned from a registry may be called "
        "(the registry's own host is always allowed), e.g. a cluster's pod network.",
    )

    @field_validator("allow_cidrs")
    @classmethod
    def _networks(cls, cidrs: list[str]) -> list[str]:
        for cidr in cidrs:
            ipaddress.ip_network(cidr, strict=False)  # ValueError names the bad one
        return cidrs

    refresh_s: float | None = Field(
        default=None, gt=0, description="Seconds between peer refreshes (default: the registry's)."
    )
    streaming: bool = Field(
        default=False,
        description="Follow peer tasks over SSE (the remote task id is known at once, so a call "
        "past its deadline also cancels it). Default: one blocking call, which costs less per "
        "hop; the peer still stops at the deadline it is given.",
    )
