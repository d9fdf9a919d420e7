"""serve_registry in its own process: it serves, stops on SIGTERM, and keeps agents across runs."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
from pathlib import Path

import httpx
import pytest

import node.registry
from node.registry import RegistrySettings

ROOT = Path(node.registry.__file__).resolve().parents[2]
SCRIPT = (
    "import asyncio, sys\n"
    "from node.registry import RegistrySettings, serve_registry\n"
    "asyncio.run(serve_registry(RegistrySettings.model_validate_json(sys.argv[1])))\n"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def start(settings: RegistrySettings) -> asyncio.subprocess.Process:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SCRIPT, settings.model_dump_json(), env=env,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    async with httpx.AsyncClient() as http:
        while True:
            try:
                if (await http.get(f"{settings.base_url}/healthz")).status_code == 200:
                    return process
            except httpx.TransportError:
                pass
            if process.returncode is not None or time.monotonic() > deadline:
                process.kill()
                _, err = await process.communicate()
                raise RuntimeError(f"registry did not start: {err.decode()[-2000:]}")
            await asyncio.sleep(0.05)


async def stop(process: asyncio.subprocess.Process) -> str:
    """SIGTERM the registry; return its log (uvicorn re-raises the signal after a clean stop)."""
    process.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(process.communicate(), timeout=20)
    assert process.returncode in (0, -signal.SIGTERM)
    return err.decode()


@pytest.mark.network
async def test_serve_registry_survives_a_process_restart(settings, card_server) -> None:
    settings = settings.model_copy(update={"port": free_port()})
    url = card_server.put_card("/a.json", "Alpha")
    process = await start(settings)
    try:
        async with httpx.AsyncClient(base_url=settings.base_url) as http:
            assert (await http.post("/v1/agents", json={"card_url": url})).status_code == 201
    finally:
        assert "Application shutdown complete" in await stop(process)
    process = await start(settings)
    try:
        async with httpx.AsyncClient(base_url=settings.base_url) as http:
            assert (await http.get("/v1/agents/alpha")).json()["card_url"] == url
    finally:
        assert "Application shutdown complete" in await stop(process)
