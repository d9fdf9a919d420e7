"""Run other implementations' A2A clients against a live node and print what happened.

    .venv/bin/python scripts/interop_clients/run.py [--only NAME ...] [--card cards/text.yaml]

Each client is installed once in its own cached venv (``tests/interop/legacy_sdk.py``: under
``~/.cache/a2a-node/venvs``, from the package index pip is configured with); its script here calls
the library's own A2A client layer (no model) against a node serving ``--card`` on 127.0.0.1 (an
ephemeral port, in this process, with a memory store). The node records what each client sent
(JSON-RPC method or REST path, ``A2A-Version`` header), so the ``protocol`` column is what went on
the wire, not what the client claims. One row per client; a client that cannot be installed or
fails shows its error in the ``result`` column (exit status 1 when any row failed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from starlette.types import ASGIApp, Message, Receive, Scope, Send  # noqa: E402

from node.card import load_card  # noqa: E402
from node.server.app import build_node_app  # noqa: E402
from node.server.serve import make_server  # noqa: E402
from tests.interop.legacy_sdk import LEGACY_REQUIREMENTS, VenvError, cached_venv  # noqa: E402

HERE = Path(__file__).parent
CLIENT_TIMEOUT_S = 180.0
BAD = {"failed", "rejected", "canceled", "input-required", "auth-required", "no answer"}
BAD |= {f"task_state_{state.replace('-', '_')}" for state in BAD}


@dataclass(frozen=True)
class Client:
    name: str
    requirements: tuple[str, ...]
    script: str
    venv: str
    install_timeout_s: float = 1800.0


CLIENTS = [
    Client("a2a-sdk 0.3", LEGACY_REQUIREMENTS, "a2a_sdk_client.py", "a2a-sdk-0.3"),
    Client("a2a-sdk 1.3", ("a2a-sdk[http-server]>=1.3,<1.4",), "a2a_sdk_client.py", "a2a-sdk-1.3"),
    Client("google-adk", ("google-adk[a2a]",), "adk_client.py", "google-adk"),
    Client("strands-agents", ("strands-agents[a2a]",), "strands_client.py", "strands-agents"),
    Client("beeai-framework", ("beeai-framework[a2a]",), "beeai_client.py", "beeai-framework"),
    Client("crewai", ("crewai[a2a]",), "crewai_client.py", "crewai", 3600.0),
]


@dataclass
class WireLog:
    """ASGI middleware noting each A2A call: ``"<version> <binding> <method or path>"``."""

    app: ASGIApp
    seen: list[str] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/.well-known/"):
            await self.app(scope, receive, send)
            return
        body = bytearray()

        async def tap() -> Message:
            message = await receive()
            body.extend(message.get("body", b""))
            return message

        await self.app(scope, tap, send)
        headers = dict(scope["headers"])
        version = headers.get(b"a2a-version", b"").decode() or "(none)"
        if scope["path"] == "/" and scope["method"] == "POST":
            with contextlib.suppress(ValueError):
                method = json.loads(body).get("method", "?")
                wire = "0.3" if "/" in method else "1.0"
                self.seen.append(f"{wire} JSON-RPC {method} (A2A-Version {version})")
        elif scope["path"].startswith("/rest/"):
            wire = "0.3" if scope["path"].startswith("/rest/v1/") else "1.0"
            self.seen.append(
                f"{wire} REST {scope['method']} {scope['path']} (A2A-Version {version})"
            )


@contextlib.asynccontextmanager
async def live_node(card_path: Path) -> AsyncIterator[tuple[str, WireLog]]:
    """The node of ``card_path`` on a free loopback port until the block ends."""
    card = load_card(card_path).model_copy(deep=True)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with tempfile.TemporaryDirectory(prefix="a2a-interop-") as data_dir:
        app = WireLog(build_node_app(card, public_url=url, data_dir=data_dir, store="memory"))
        server = make_server(app, "127.0.0.1", 0)
        server.config.lifespan = "on"
        task = asyncio.create_task(server.serve(sockets=[sock]))
        deadline = time.monotonic() + 30
        while not server.started:
            if task.done() or time.monotonic() > deadline:
                raise RuntimeError("the node did not start")
            await asyncio.sleep(0.02)
        try:
            yield url, app
        finally:
            server.should_exit = True
            await asyncio.wait_for(task, 15)


async def run_client(client: Client, url: str, log: WireLog) -> dict[str, Any]:
    """Install (cached) and run one client; its row."""
    row: dict[str, Any] = {"client": client.name, "version": "?", "protocol": "", "result": ""}
    try:
        python = await asyncio.to_thread(
            cached_venv, client.requirements, client.venv, timeout=client.install_timeout_s
        )
    except VenvError as exc:
        row["result"] = f"not installed: {str(exc).splitlines()[0]}"
        return row
    log.seen.clear()
    process = await asyncio.create_subprocess_exec(
        str(python),
        str(HERE / client.script),
        url,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=HERE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), CLIENT_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        out, err = b"", f"no answer within {CLIENT_TIMEOUT_S:.0f} s".encode()
    lines = out.decode(errors="replace").strip().splitlines()
    try:
        answer = json.loads(lines[-1])
    except (IndexError, ValueError):
        answer = {"error": err.decode(errors="replace").strip().splitlines()[-1:] or "no output"}
    row["version"] = answer.get("version", "?")
    row["protocol"] = "; ".join(dict.fromkeys(log.seen)) or "(nothing reached the node)"
    if "error" in answer:
        row["result"] = f"❌ {answer['error']}"
    else:
        row["result"] = f"{answer.get('state')}: {json.dumps(answer.get('answer'))[:100]}"
        row["ok"] = bool(answer.get("answer")) and str(answer.get("state")).lower() not in BAD
    return row


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| client | version | protocol it chose (as the node saw it) | result |",
        "|---|---|---|---|",
    ]
    for row in rows:
        cells = [row["client"], row["version"], row["protocol"], row["result"]]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--card", type=Path, default=ROOT / "cards" / "text.yaml")
    parser.add_argument("--only", nargs="*", help="client names (default: all)")
    args = parser.parse_args(argv)
    chosen = [c for c in CLIENTS if not args.only or c.name in args.only or c.venv in args.only]
    rows = []
    async with live_node(args.card) as (url, log):
        for client in chosen:
            print(f"… {client.name}", file=sys.stderr, flush=True)
            rows.append(await run_client(client, url, log))
    print(table(rows))
    return 0 if all(row.get("ok") for row in rows) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
