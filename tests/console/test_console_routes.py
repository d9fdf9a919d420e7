"""The console at ``/ui``: public, data-free files with a strict CSP; the API stays guarded.

A node with bearer tokens and a registry that needs a read token run in-process: the page loads
without a token, every call it makes for data needs one (the node's or registry's own rules).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from node.card import parse_card
from node.console.routes import SECURITY_HEADERS
from node.registry.app import build_registry_app
from node.registry.settings import RegistrySettings
from node.server.app import build_node_app
from tests.servers import InProcessApps

CARDS = Path(__file__).resolve().parents[2] / "cards"
SECRET = "console-test-token-0123456789"
FILES = ["/ui/", "/ui/console.css", "/ui/js/main.js", "/ui/js/task.js", "/ui/config.json"]


@pytest.fixture
def node_card():  # the data node, with a bearer token
    data = yaml.safe_load((CARDS / "data.yaml").read_text(encoding="utf-8"))
    data["auth"] = {"bearer_tokens": [{"secret": SECRET, "principal": "operator"}]}
    return parse_card(data)


async def test_a_node_serves_its_console_openly_and_its_tasks_to_a_token(
    apps: InProcessApps, node_card, tmp_path: Path
) -> None:
    url = await apps.start(
        lambda u: build_node_app(node_card, public_url=u, data_dir=tmp_path, store="memory")
    )
    async with apps.client(base_url=url, headers={"A2A-Version": "1.0"}) as http:
        for path in FILES:
            response = await http.get(path)
            assert response.status_code == 200, path
            assert response.headers["content-security-policy"].startswith("default-src 'self'")
        assert (await http.get("/ui/config.json")).json() == {
            "role": "node", "agent_id": "data", "rest": "/rest"
        }  # fmt: skip
        assert (await http.get("/ui")).headers["location"] == "/ui/"
        assert (await http.get("/ui/%2e%2e/%2e%2e/card.py")).status_code == 404
        assert (await http.get("/ui/js/nothing.js")).status_code == 404
        assert (await http.get("/rest/tasks")).status_code == 401
        listed = await http.get("/rest/tasks", headers={"Authorization": f"Bearer {SECRET}"})
        assert listed.status_code == 200 and listed.json()["tasks"] == []


async def test_the_registry_serves_the_network_console_and_guards_its_listing(
    apps: InProcessApps, tmp_path: Path
) -> None:
    settings = RegistrySettings(
        db=str(tmp_path / "r.db"), token=SECRET, read_token_required=True, ttl_s=8
    )
    url = await apps.start(lambda _: build_registry_app(settings))
    async with apps.client(base_url=url) as http:
        page = await http.get("/ui/")
        assert page.status_code == 200 and '<main id="main"' in page.text
        assert page.headers["x-content-type-options"] == SECURITY_HEADERS["x-content-type-options"]
        assert (await http.get("/ui/config.json")).json() == {
            "role": "registry",
            "refresh_ms": 2000,
        }
        assert (await http.get("/v1/agents")).status_code == 401
        auth = {"Authorization": f"Bearer {SECRET}"}
        assert (await http.get("/v1/agents", headers=auth)).json()["agents"] == []
