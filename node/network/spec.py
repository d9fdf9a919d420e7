"""The YAML of ``a2a-node up``: a registry, an optional static demo site and some nodes.

    registry: {port: 8090, db: registry.db, ttl_s: 30}
    site: {port: 8099, dir: site}          # optional; served by ``python -m http.server``
    nodes:
      - {card: ../cards/web.yaml, port: 8101, grpc_port: 9101, allow_cidrs: [127.0.0.0/8]}
    example: "a2a-node send {coordinator} --skill page_report --arg url={site}/"

Card and site paths are relative to the YAML file; the registry's ``db`` is relative to the run
directory. Everything binds 127.0.0.1. The registry token is never in this file: ``up`` makes one.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from node.errors import ConfigError

__all__ = ["NetworkSpec", "NodeSpec", "RegistrySpec", "RestartPolicy", "SiteSpec", "load_spec"]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _check_cidrs(value: list[str]) -> list[str]:
    for cidr in value:
        ipaddress.ip_network(cidr, strict=False)
    return value


class RegistrySpec(_Spec):
    port: int = Field(ge=1, le=65535)
    grpc_port: int | None = Field(default=None, ge=1, le=65535)
    """``--grpc-port``: its A2A endpoint over gRPC too."""
    db: str = "registry.db"
    ttl_s: float = Field(default=30.0, gt=0)
    allow_cidrs: list[str] = Field(default_factory=lambda: ["127.0.0.0/8", "::1/128"])
    restart: bool = True

    _cidrs = field_validator("allow_cidrs")(_check_cidrs)


class SiteSpec(_Spec):
    port: int = Field(ge=1, le=65535)
    dir: str


class NodeSpec(_Spec):
    card: str
    port: int = Field(ge=1, le=65535)
    grpc_port: int | None = Field(default=None, ge=1, le=65535)
    """``--grpc-port``: also serve A2A over gRPC on this port (default: the card's, if any)."""
    name: str | None = None
    """Shown in the table and used for the log file (default: the card's id)."""
    allow_cidrs: list[str] = Field(default_factory=list)
    restart: bool = False
    store: str | None = None
    """``--store`` for the node (default: the card's store in the run directory)."""

    _cidrs = field_validator("allow_cidrs")(_check_cidrs)


class RestartPolicy(_Spec):
    max_restarts: int = Field(default=5, ge=0)
    backoff_initial_s: float = Field(default=0.5, gt=0)
    backoff_max_s: float = Field(default=8.0, gt=0)
    stable_after_s: float = Field(default=30.0, gt=0)
    """A child that ran this long before crashing starts counting its restarts afresh."""


class NetworkSpec(_Spec):
    registry: RegistrySpec
    site: SiteSpec | None = None
    nodes: list[NodeSpec] = Field(min_length=1)
    restart: RestartPolicy = Field(default_factory=RestartPolicy)
    startup_timeout_s: float = Field(default=60.0, gt=0)
    stop_timeout_s: float = Field(default=5.0, gt=0)
    example: str | None = None
    """The example command printed once up; ``{name}`` is a node's URL, also ``{site}``."""

    @model_validator(mode="after")
    def _distinct_ports(self) -> Self:
        ports = [self.registry.port, *(n.port for n in self.nodes)]
        grpc = [self.registry.grpc_port, *(n.grpc_port for n in self.nodes)]
        ports += [p for p in grpc if p is not None]
        if self.site is not None:
            ports.append(self.site.port)
        dupes = sorted({p for p in ports if ports.count(p) > 1})
        if dupes:
            raise ValueError(f"ports used twice: {', '.join(map(str, dupes))}")
        return self


def load_spec(path: str | Path) -> NetworkSpec:
    """Read and validate a network file; errors name the file and the YAML path."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read network file: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from exc
    try:
        return NetworkSpec.model_validate(data)
    except ValidationError as exc:
        lines = [
            f"{path}: {'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in exc.errors()
        ]
        raise ConfigError("\n".join(lines)) from exc
