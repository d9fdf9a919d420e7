"""``a2a-node up``: the real command, with a registry, the demo site and a node as its children."""

from __future__ import annotations

import os
import re
import shlex
import signal
from pathlib import Path

import httpx
import pytest
import yaml
from netsupport import (
    CARDS,
    CLI,
    ROOT,
    agents,
    alive,
    answers,
    children_of,
    free_ports,
    port_free,
    wait_for,
)

from node.network.children import Child
from node.network.launcher import TOKEN_ENV

pytestmark = pytest.mark.network


def _spec(
    tmp_path: Path, reg: int, site: int, data: int, grpc: int, reg_grpc: int | None = None
) -> Path:
    spec = {
        "registry": {"port": reg, "ttl_s": 5, "grpc_port": reg_grpc},
        "site": {"port": site, "dir": str(ROOT / "deploy" / "site")},
        "nodes": [
            {"card": str(CARDS / "data.yaml"), "port": data, "grpc_port": grpc, "restart": True}
        ],
        "restart": {"backoff_initial_s": 0.1},
        "startup_timeout_s": 30,
        "example": "a2a-node send {data} --skill calculate --arg expression=6*7",
    }
    path = tmp_path / "net.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().partition("=")[::2] for item in raw if b"=" in item)


async def test_up_starts_restarts_a_crashed_node_and_stops_everything(tmp_path: Path) -> None:
    reg, site, data, grpc, reg_grpc = ports = free_ports(5)
    run_dir = tmp_path / "run"
    spec = _spec(tmp_path, reg, site, data, grpc, reg_grpc)
    argv = [*CLI, "up", str(spec), "--run-dir", str(run_dir)]
    up = Child("up", argv, tmp_path / "up.log")
    await up.start()
    seen: set[int] = set()
    try:

        async def printed_table() -> bool:
            if not up.running:
                raise AssertionError(f"up exited early:\n{up.log_tail(30)}")
            return "Ctrl-C stops every process" in up.log_path.read_text()

        await wait_for(printed_table, timeout=40.0, what="the table of running nodes")
        out = up.log_path.read_text()
        assert f"http://127.0.0.1:{data}" in out and "calculate" in out
        assert f"try:   a2a-node send http://127.0.0.1:{data} --skill calculate" in out
        assert up.pid is not None
        children = children_of(up.pid)
        assert len(children) == 3  # registry, site, data: nothing else
        seen |= set(children)
        assert "data" in await agents(f"http://127.0.0.1:{reg}", healthy="true")
        assert await answers(f"http://127.0.0.1:{site}/")
        for http_port, grpc_port in ((data, grpc), (reg, reg_grpc)):
            card = httpx.get(f"http://127.0.0.1:{http_port}/.well-known/agent-card.json").json()
            grpc_1_0 = {"url": f"127.0.0.1:{grpc_port}", "protocolVersion": "1.0"}
            assert grpc_1_0 | {"protocolBinding": "GRPC"} in card["supportedInterfaces"]

        token = next(t for pid in children if (t := _environ(pid).get(TOKEN_ENV)))
        assert token not in out  # never printed, not even in part
        await _join_as_printed(out, tmp_path, f"http://127.0.0.1:{reg}")

        # a crashed node is reported and restarted (restart: true)
        (data_pid,) = (
            pid for pid in children if "--port" in _cmdline(pid) and str(data) in _cmdline(pid)
        )
        os.kill(data_pid, signal.SIGKILL)

        async def restarted() -> bool:
            assert up.pid is not None
            fresh = set(children_of(up.pid)) - set(children)
            seen.update(fresh)
            return bool(fresh) and await answers(f"http://127.0.0.1:{data}/readyz")

        await wait_for(restarted, timeout=30.0, what="the data node to be restarted")
        assert "data exited with code -9" in up.log_path.read_text()
        assert "restarting data" in up.log_path.read_text()

        up.signal(signal.SIGINT)
        assert await up.wait() == 0
    finally:
        await up.stop(10.0)
    assert "all processes stopped" in up.log_path.read_text()
    assert not [pid for pid in seen if alive(pid)]  # no orphans
    assert all(port_free(p) for p in ports)
    assert {p.name for p in run_dir.glob("*.log")} == {"registry.log", "site.log", "data.log"}


async def _join_as_printed(out: str, tmp_path: Path, registry: str) -> None:
    """Run the printed ``join:`` commands in a shell without the token, with a card of ours."""
    (export,) = [line.removeprefix("join:").strip() for line in out.splitlines() if "join:" in line]
    (serve,) = [line.strip() for line in out.splitlines() if "a2a-node serve YOUR_CARD" in line]
    (token_file,) = [Path(p) for p in shlex.split(re.findall(r"\$\(cat (.+?)\)", export)[0])]
    assert token_file.stat().st_mode & 0o777 == 0o600  # the user's own, like ~/.ssh keys
    (port,) = free_ports(1)  # the printed one may be taken on a busy test machine
    serve = re.sub(r"--port \d+", f"--port {port}", serve)
    serve = serve.replace("YOUR_CARD.yaml", str(CARDS / "text.yaml"))
    serve = serve.replace("a2a-node ", " ".join(CLI) + " ", 1)
    serve += f" --data-dir {tmp_path / 'joined'}"
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    joined = Child(
        "joined", ["bash", "-c", f"{export} && exec {serve}"], tmp_path / "joined.log", env=env
    )
    await joined.start()
    try:

        async def listed() -> bool:
            if not joined.running:
                raise AssertionError(f"the joined node exited:\n{joined.log_tail(20)}")
            return "text" in await agents(registry, healthy="true")

        await wait_for(listed, timeout=30.0, what="the joined node in the registry")
    finally:
        await joined.stop(10.0)


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


async def test_up_refuses_a_port_in_use_and_starts_nothing(tmp_path: Path) -> None:
    import socket

    reg, site, data, grpc = free_ports(4)
    with socket.socket() as taken, socket.socket() as taken_grpc:
        taken.bind(("127.0.0.1", site))
        taken.listen()
        taken_grpc.bind(("127.0.0.1", grpc))
        taken_grpc.listen()
        spec = _spec(tmp_path, reg, site, data, grpc)
        argv = [*CLI, "up", str(spec), "--run-dir", str(tmp_path)]
        up = Child("up", argv, tmp_path / "up.log")
        await up.start()
        try:
            assert await up.wait() == 2  # cannot start as configured
        finally:
            await up.stop()
    out = up.log_path.read_text()
    assert (
        f"already in use on this machine: http://127.0.0.1:{site} (site), "
        f"127.0.0.1:{grpc} (data gRPC)"
    ) in out
    assert not list(tmp_path.glob("registry.log"))
