"""``a2a-node serve``: what it prints once it listens, when it cannot start, when refused."""

from __future__ import annotations

import os
import socket

import grpc
import grpc.aio
import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import SendMessageRequest

from node.card import load_card
from node.cli import build_parser
from node.cli.common import CliError
from node.cli.serve import event_loop
from node.client import artifacts_of, skill_message, status_text
from node.registry import RegistrySettings
from node.registry.app import build_registry_app
from node.server.app import build_node_app
from tests.cli.clisupport import DATA_CARD, cli, running

PG_URL = os.environ.get("A2A_NODE_TEST_PG_URL")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def test_serve_prints_one_line_with_its_urls_once_it_listens(tmp_path):
    port = free_port()
    args = ("serve", DATA_CARD, "--port", str(port), "--data-dir", str(tmp_path))
    async with running(*args) as node:
        line = await node.wait_for_line("serving")
    url = f"http://127.0.0.1:{port}"
    assert line == (
        f"a2a-node: serving data (Data Node) at {url}; card: {url}/.well-known/agent-card.json\n"
    )
    assert node.out == [line]  # nothing else at the default level


async def test_a_data_dir_in_use_is_one_line_and_exit_2(serve, tmp_path):
    card = load_card(DATA_CARD)
    await serve(lambda u: build_node_app(card, public_url=u, data_dir=tmp_path))  # holds tasks.db
    args = ("serve", DATA_CARD, "--port", str(free_port()), "--data-dir", str(tmp_path))
    code, out, err = await cli(*args)
    assert (code, out) == (2, "")
    assert err == f"a2a-node: task store {tmp_path}/tasks.db is in use by another process " + (
        "(another node?)\n"
    )


@pytest.mark.postgres
@pytest.mark.skipif(not PG_URL, reason="needs A2A_NODE_TEST_PG_URL")
async def test_a_missing_postgresql_database_is_one_line_and_exit_2(tmp_path):
    assert PG_URL is not None
    missing = PG_URL.rsplit("/", 1)[0] + "/a2a_node_no_such_database"
    args = ("serve", DATA_CARD, "--port", str(free_port()), "--store", missing)
    code, out, err = await cli(*args, "--data-dir", str(tmp_path))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "a2a_node_no_such_database" in err and "does not exist" in err


async def test_a_taken_port_is_reported_without_a_traceback(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, _, err = await cli(
            "serve", DATA_CARD, "--port", str(port), "--data-dir", str(tmp_path)
        )
    assert code == 2 and "address already in use" in err and "Traceback" not in err


async def test_the_node_logs_why_a_registry_refuses_it(serve, tmp_path):
    registry = await serve(
        lambda u: build_registry_app(RegistrySettings(public_url=u, db=str(tmp_path / "r.db")))
    )  # no --allow-cidr: the registry may not fetch cards from loopback
    port = free_port()
    args = ("serve", DATA_CARD, "--port", str(port), "--data-dir", str(tmp_path / "data"))
    async with running(*args, "--registry", registry) as node:
        line = await node.wait_for_line("registration refused", stream="err")
    assert "422 url_refused" in line and "non-public address" in line
    assert "start the registry with --allow-cidr 127.0.0.0/8" in line


async def test_serve_refuses_an_unknown_tool_with_a_suggestion(tmp_path):
    card = tmp_path / "mine.yaml"
    card.write_text("id: mine\nname: Mine\ndescription: d\ntools: [calculat]\n", encoding="utf-8")
    code, out, err = await cli("serve", str(card), "--port", str(free_port()))
    assert (code, out) == (2, "")
    assert "unknown tool 'calculat' (did you mean 'calculate'?)" in err


async def test_serve_grpc_port_serves_the_sdk_grpc_client(tmp_path):
    port = free_port()
    args = ("serve", DATA_CARD, "--port", str(port), "--grpc-port", "0")
    async with running(*args, "--data-dir", str(tmp_path)) as node:
        line = await node.wait_for_line("serving")
        address = line.rsplit("; gRPC: ", 1)[1].strip()
        assert address.startswith("127.0.0.1:") and not address.endswith(":0")
        async with httpx.AsyncClient(timeout=5.0) as http:
            card = await A2ACardResolver(http, f"http://127.0.0.1:{port}").get_agent_card()
        assert ("GRPC", address) in {(i.protocol_binding, i.url) for i in card.supported_interfaces}
        config = ClientConfig(
            streaming=False,
            supported_protocol_bindings=["GRPC"],
            grpc_channel_factory=grpc.aio.insecure_channel,
        )
        async with ClientFactory(config).create(card) as client:
            message = skill_message("calculate", {"expression": "2+2"})
            events = [e async for e in client.send_message(SendMessageRequest(message=message))]
    task = events[-1].task
    assert artifacts_of(task) == {"calculate": [4]}, status_text(task)


async def test_a_taken_grpc_port_is_one_line_and_exit_2(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        grpc_port = taken.getsockname()[1]
        code, out, err = await cli(
            "serve", DATA_CARD, "--port", str(free_port()), "--grpc-port", str(grpc_port),
            "--data-dir", str(tmp_path),
        )  # fmt: skip
    assert (code, out) == (2, "")
    assert err == f"a2a-node: cannot serve gRPC on 127.0.0.1:{grpc_port}: the port is in use\n"


def test_serve_runs_on_asyncio_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("A2A_NODE_LOOP", raising=False)
    parse = build_parser().parse_args
    assert event_loop(parse(["serve", "card.yaml"])) == "asyncio"
    assert event_loop(parse(["serve", "card.yaml", "--loop", "uvloop"])) == "uvloop"
    monkeypatch.setenv("A2A_NODE_LOOP", "uvloop")
    assert event_loop(parse(["serve", "card.yaml"])) == "uvloop"
    assert event_loop(parse(["serve", "card.yaml", "--loop", "asyncio"])) == "asyncio"
    monkeypatch.setenv("A2A_NODE_LOOP", "trio")
    with pytest.raises(CliError, match="A2A_NODE_LOOP='trio': expected asyncio or uvloop"):
        event_loop(parse(["serve", "card.yaml"]))
    with pytest.raises(SystemExit):
        parse(["serve", "card.yaml", "--loop", "trio"])
