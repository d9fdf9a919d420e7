"""deploy/: compose.yaml, k8s/ and local.yaml agree with the cards in cards/ (static checks)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from node.card import load_card
from node.network.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SPEC = load_spec(DEPLOY / "local.yaml")


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("deploy_generate", DEPLOY / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()
NODES = {  # card id → (port, card file)
    load_card(DEPLOY / n.card).id: (n.port, (DEPLOY / n.card).resolve()) for n in SPEC.nodes
}
GRPC = {load_card(DEPLOY / n.card).id: n.grpc_port for n in SPEC.nodes}  # card id → gRPC port


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


K8S = {  # (kind, name) → object, for every object in deploy/k8s (the kustomization has no name)
    (d["kind"], d.get("metadata", {}).get("name", "")): d
    for p in (DEPLOY / "k8s").glob("*.yaml")
    for d in _docs(p)
}
COMPOSE = yaml.safe_load((DEPLOY / "compose.yaml").read_text(encoding="utf-8"))["services"]


def test_generated_files_are_up_to_date() -> None:
    rendered = GEN.render()
    for rel, text in rendered.items():
        assert (ROOT / rel).read_text(encoding="utf-8") == text, f"run deploy/generate.py: {rel}"
    on_disk = {p.relative_to(ROOT) for p in (DEPLOY / "k8s").iterdir()}
    assert on_disk == {rel for rel in rendered if rel.parts[:2] == ("deploy", "k8s")}


def test_every_card_is_in_the_network_or_excluded_with_a_reason() -> None:
    for card_file in sorted((ROOT / "cards").glob("*.yaml")):
        assert card_file.stem in NODES or GEN.EXCLUDED.get(card_file.stem), card_file.name


@pytest.mark.parametrize("node_id", sorted(NODES))
def test_local_yaml_ports_match_the_cards(node_id: str) -> None:
    port, card_file = NODES[node_id]
    assert load_card(card_file).server.port == port
    assert card_file.stem == node_id


def test_every_node_and_the_registry_serve_grpc_on_a_port_of_their_own() -> None:
    assert all(GRPC.values()) and SPEC.registry.grpc_port
    http = [SPEC.registry.port, *(p for p, _ in NODES.values())]
    assert SPEC.site is not None
    ports = [*http, SPEC.site.port, SPEC.registry.grpc_port, *GRPC.values()]
    assert len(set(ports)) == len(ports)


def test_local_network_has_its_demo_site_and_web_may_reach_it() -> None:
    assert SPEC.site is not None
    assert len(list((DEPLOY / SPEC.site.dir).glob("*.html"))) >= 2
    web = next(n for n in SPEC.nodes if Path(n.card).stem == "web")
    assert "127.0.0.0/8" in web.allow_cidrs


REPLICAS = {  # compose service → card id: each node's container, or the replicated node's replicas
    **{n: n for n in NODES if n != GEN.REPLICATED},
    **{f"{GEN.REPLICATED}-{i}": GEN.REPLICATED for i in range(1, GEN.COMPOSE_REPLICAS + 1)},
}


@pytest.mark.parametrize("name", sorted(REPLICAS))
def test_compose_runs_each_card_on_its_port(name: str) -> None:
    node_id = REPLICAS[name]
    port, card_file = NODES[node_id]
    service = COMPOSE[name]
    command = service["command"]
    assert command[:2] == ["serve", f"{GEN.CARD_DIR}/{node_id}.yaml"]
    assert command[command.index("--port") + 1] == str(port)
    assert command[command.index("--registry") + 1] == f"http://registry:{SPEC.registry.port}"
    assert service["volumes"] == [f"../cards/{card_file.name}:{GEN.CARD_DIR}/{node_id}.yaml:ro"]
    grpc = GRPC[node_id]
    published = COMPOSE[node_id]["ports"]  # by the node's container, or by its balancer
    assert published == [f"127.0.0.1:{port}:{port}", f"127.0.0.1:{grpc}:{grpc}"]
    assert command[command.index("--grpc-port") + 1] == str(grpc)
    assert command[command.index("--public-url") + 1] == f"http://{node_id}:{port}"
    assert f"127.0.0.1:{port}/healthz" in service["healthcheck"]["test"][-1]
    assert (DEPLOY / service["build"]["dockerfile"].removeprefix("deploy/")).is_file()
    assert service["environment"][GEN.TOKEN_ENV].startswith("${" + GEN.TOKEN_ENV)


def test_compose_has_the_registry_and_postgres() -> None:
    # no Redis: replicas exchange events through PostgreSQL LISTEN/NOTIFY (docs/stores.md)
    assert set(COMPOSE) == {"registry", "postgres", *NODES, *REPLICAS}
    assert all("redis" not in str(service).lower() for service in COMPOSE.values())
    registry = COMPOSE["registry"]
    port, grpc = SPEC.registry.port, SPEC.registry.grpc_port
    assert registry["command"][registry["command"].index("--port") + 1] == str(port)
    assert registry["command"][registry["command"].index("--grpc-port") + 1] == str(grpc)
    assert registry["ports"] == [f"127.0.0.1:{port}:{port}", f"127.0.0.1:{grpc}:{grpc}"]
    assert f"127.0.0.1:{port}/healthz" in registry["healthcheck"]["test"][-1]
    init = (DEPLOY / "postgres-init.sql").read_text(encoding="utf-8")
    assert all(f"CREATE DATABASE a2a_{n.replace('-', '_')} " in init for n in NODES)


@pytest.mark.parametrize("node_id", sorted(NODES))
def test_k8s_has_a_configmap_deployment_and_service_per_card(node_id: str) -> None:
    port, card_file = NODES[node_id]
    configmap = K8S[("ConfigMap", f"{node_id}-card")]
    assert configmap["data"] == {f"{node_id}.yaml": card_file.read_text(encoding="utf-8")}
    deployment = K8S[("Deployment", node_id)]
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["args"][:2] == ["serve", f"{GEN.CARD_DIR}/{node_id}.yaml"]
    assert container["args"][container["args"].index("--port") + 1] == str(port)
    grpc = GRPC[node_id]
    assert container["ports"] == [
        {"name": "http", "containerPort": port},
        {"name": "grpc", "containerPort": grpc},
    ]
    assert container["args"][container["args"].index("--grpc-port") + 1] == str(grpc)
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["card"]["configMap"]["name"] == f"{node_id}-card"
    assert (
        deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    )
    service = K8S[("Service", node_id)]
    assert [p["port"] for p in service["spec"]["ports"]] == [port, grpc]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_k8s_registry_and_kustomization_list_every_object() -> None:
    ports = [p["port"] for p in K8S[("Service", "registry")]["spec"]["ports"]]
    assert ports == [SPEC.registry.port, SPEC.registry.grpc_port]
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    listed = {Path(r).stem for r in kustomization["resources"]}
    assert listed == {"registry", *NODES}


def test_the_image_exposes_every_http_and_grpc_port() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    (line,) = [line for line in dockerfile.splitlines() if line.startswith("EXPOSE ")]
    exposed = {int(port) for port in line.split()[1:]}
    assert exposed == {
        SPEC.registry.port,
        SPEC.registry.grpc_port,
        *(port for port, _ in NODES.values()),
        *GRPC.values(),
    }


@pytest.mark.parametrize("node_id", sorted(NODES))
def test_k8s_nodes_run_replicas_that_roll_and_drain_safely(node_id: str) -> None:
    spec = K8S[("Deployment", node_id)]["spec"]
    assert spec["replicas"] >= 2
    assert spec["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    from node.store.cluster import DRAIN_GRACE_S

    assert spec["template"]["spec"]["terminationGracePeriodSeconds"] > DRAIN_GRACE_S
    budget = K8S[("PodDisruptionBudget", node_id)]["spec"]
    assert budget["minAvailable"] == 1
    assert budget["selector"] == spec["selector"]


def test_compose_balances_the_replicated_node_with_haproxy() -> None:
    name = GEN.REPLICATED
    port, grpc = NODES[name][0], GRPC[name]
    balancer = COMPOSE[name]
    assert balancer["image"].startswith("haproxy:")
    replicas = [n for n, node in REPLICAS.items() if node == name]
    assert len(replicas) >= 2
    assert balancer["depends_on"] == {r: {"condition": "service_healthy"} for r in replicas}
    config_file = DEPLOY / "haproxy" / f"{name}.cfg"
    assert balancer["volumes"] == [f"./haproxy/{name}.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro"]
    config = config_file.read_text(encoding="utf-8")
    assert f"bind *:{port}" in config and f"bind *:{grpc}" in config
    for replica in replicas:
        assert f"server {replica} {replica}:{port} check" in config
        assert f"server {replica} {replica}:{grpc} check" in config
        assert "ports" not in COMPOSE[replica]  # reached only through the balancer
    haproxy = shutil.which("haproxy")
    if haproxy:  # CI installs it (.ci/run); the check needs no network
        check = subprocess.run([haproxy, "-c", "-f", str(config_file)], capture_output=True)
        assert check.returncode == 0, check.stderr
