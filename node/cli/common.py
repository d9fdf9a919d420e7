"""What every command of the CLI shares: exit codes, its errors, argument helpers.

Exit codes (the README lists them for scripts):

- ``0`` the command did what was asked (a task completed);
- ``1`` a task did not complete (failed, rejected, canceled, waiting for input) or a node or
  registry failed or could not be reached;
- ``2`` bad arguments, an invalid card or setting, a store or network that cannot start;
- ``3`` a batch completed but some of its calls failed (a partial outcome).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
from collections.abc import Sequence
from typing import Any

from node.errors import ConfigError, NodeError, StoreError

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_PARTIAL",
    "EXIT_USAGE",
    "CliError",
    "RemoteError",
    "add_client_options",
    "add_json_option",
    "exit_code_of",
    "is_loopback",
    "parse_kv",
    "token_of",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_PARTIAL = 3


class CliError(NodeError):
    """A user-facing command-line error: bad arguments or a refused setting (exit 2)."""


class RemoteError(NodeError):
    """A node or registry failed, answered something unusable, or could not be reached (exit 1)."""


#: Errors that mean "this cannot start as configured" exit 2; every other NodeError exits 1.
_SETUP_ERRORS: tuple[type[NodeError], ...] = (CliError, ConfigError, StoreError)


def exit_code_of(exc: NodeError) -> int:
    """The exit code for a known error (see the module docstring)."""
    from node.network.launcher import LaunchError

    return EXIT_USAGE if isinstance(exc, (*_SETUP_ERRORS, LaunchError)) else EXIT_FAILED


def _parse_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def parse_kv(pairs: Sequence[str]) -> dict[str, Any]:
    """``["a=1", "b=x"]`` → ``{"a": 1, "b": "x"}`` (values parsed as JSON when they are JSON)."""
    arguments: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--arg expects key=value, got {pair!r}")
        arguments[key] = _parse_value(value)
    return arguments


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def add_client_options(p: argparse.ArgumentParser) -> None:
    """Credentials for talking to a node."""
    p.add_argument("--token", help="bearer token (default: $A2A_NODE_TOKEN)")
    p.add_argument("--api-key", help="API key, sent as the X-API-Key header")


def add_arg_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one argument; VALUE is parsed as JSON when it is JSON (repeatable)",
    )


def add_json_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--json",
        action="store_true",
        help="print one JSON document on stdout (for scripts) instead of text",
    )


def token_of(args: argparse.Namespace) -> str | None:
    return args.token or os.environ.get("A2A_NODE_TOKEN") or None
