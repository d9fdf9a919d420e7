"""Helpers for the multi-process tests: real registry and node processes on free loopback ports.

Every process is a :class:`node.network.children.Child` (its own process group, output in a log
file under the test's tmp dir) started through :class:`Processes`, which stops them all, even
when the test fails. Nothing here sleeps for a fixed time: :func:`wait_for` polls to a deadline.
"""

from __future__ import annotations

import asyncio
import copy
import os
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml

from node.network.children import Child

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[2]
CARDS = ROOT / "cards"
CLI = [sys.executable, "-m", "node.cli"]
TOKEN_ENV = "A2A_NODE_REGISTRY_TOKEN"
TOKEN = "test-registry-token-0123456789"


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports that were free a moment ago on 127.0.0.1."""
    socks = []
    for _ in range(count):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        socks.append(sock)
    ports = [s.getsockname()[1] for s in socks]
    for sock in socks:
        sock.close()
    return ports


def port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _stat(pid: int) -> tuple[str, str, int] | None:
    """``(comm, state, ppid)`` of a process from /proc, or ``None`` when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = raw[raw.index("(") + 1 : raw.rindex(")")]
    state, ppid = raw[raw.rindex(")") + 2 :].split()[:2]
    return comm, state, int(ppid)


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = _stat(pid)
    return stat is not None and stat[1] != "Z"


def children_of(pid: int) -> dict[int, str]:
    """``{pid: command name}`` of the live processes whose parent is ``pid`` (a /proc scan)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None and stat[2] == pid and stat[1] != "Z":
                found[int(entry.name)] = stat[0]
    return found


async def wait_for(
    check: Callable[[], Awaitable[T]], *, timeout: float = 15.0, what: str = "condition"
) -> T:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


async def answers(url: str) -> bool:
    async with httpx.AsyncClient(timeout=1.0) as http:
        try:
            return (await http.get(url)).status_code == 200
        except httpx.HTTPError:
            return False


async def agents(registry: str, **params: Any) -> dict[str, dict[str, Any]]:
    """The registry's entries by id (``{}`` when it does not answer)."""
    query = {"page_size": 200, **params}
    async with httpx.AsyncClient(timeout=2.0) as http:
        try:
            response = await http.get(f"{registry}/v1/agents", params=query)
        except httpx.HTTPError:
            return {}
    return {a["id"]: a for a in response.json()["agents"]} if response.status_code == 200 else {}


def merge(base: dict[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` merged in, recursively for mappings."""
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def card(name: str, **changes: Any) -> dict[str, Any]:
    """The YAML data of ``cards/<name>.yaml`` with ``changes`` merged in."""
    data = yaml.safe_load((CARDS / f"{name}.yaml").read_text(encoding="utf-8"))
    return merge(data, changes)


class Processes:
    """Starts children for one test (or module) and stops every one of them in :meth:`close`."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.env = {**os.environ, TOKEN_ENV: TOKEN, "PYTHONUNBUFFERED": "1"}
        self.children: list[Child] = []

    async def start(self, name: str, argv: list[str], ready_url: str | None = None) -> Child:
        child = Child(name, argv, self.tmp / f"{name}.log", env=self.env)
        self.children.append(child)
        await child.start()
        if ready_url is not None:
            await self.ready(child, ready_url)
        return child

    async def ready(self, child: Child, url: str, timeout: float = 30.0) -> None:
        async def up() -> bool:
            if not child.running:
                raise AssertionError(f"{child.name} exited early:\n{child.log_tail(30)}")
            return await answers(url)

        await wait_for(up, timeout=timeout, what=f"{child.name} at {url}")

    async def registry(self, port: int, *, ttl: float = 2.0, name: str = "registry") -> Child:
        argv = [*CLI, "--log-level", "info", "registry", "--port", str(port)]
        argv += ["--db", str(self.tmp / f"{name}.db"), "--token-env", TOKEN_ENV, "--ttl", str(ttl)]
        argv += ["--allow-cidr", "127.0.0.0/8"]
        return await self.start(name, argv)

    def write_card(self, data: Mapping[str, Any]) -> Path:
        path = self.tmp / f"{data['id']}.card.yaml"
        path.write_text(yaml.safe_dump(dict(data), sort_keys=False), encoding="utf-8")
        return path

    async def node(self, data: Mapping[str, Any], port: int, *extra: str) -> Child:
        path = self.write_card(data)
        argv = [*CLI, "--log-level", "info", "serve", str(path), "--port", str(port)]
        argv += ["--data-dir", str(self.tmp / f"{data['id']}-data"), *extra]
        return await self.start(str(data["id"]), argv)

    async def close(self) -> None:
        await asyncio.gather(*(c.stop(5.0) for c in self.children))
