"""The network file of ``a2a-node up`` and the command lines the launcher builds from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.cli.output import format_table
from node.errors import ConfigError
from node.network.launcher import TOKEN_ENV, Network, mask
from node.network.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
LOCAL = ROOT / "deploy" / "local.yaml"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "net.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_ports_used_twice_are_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "registry: {port: 9000}\nnodes: [{card: a.yaml, port: 9000}]\n")
    with pytest.raises(ConfigError, match="ports used twice: 9000"):
        load_spec(path)


def test_a_grpc_port_may_not_be_another_port(tmp_path: Path) -> None:
    text = "registry: {port: 9000}\nnodes: [{card: a.yaml, port: 9001, grpc_port: 9000}]\n"
    with pytest.raises(ConfigError, match="ports used twice: 9000"):
        load_spec(_write(tmp_path, text))


def test_errors_name_the_file_and_the_yaml_path(tmp_path: Path) -> None:
    path = _write(tmp_path, "registry: {port: 9000}\nnodes: [{card: a.yaml, port: 9001, x: 1}]\n")
    with pytest.raises(ConfigError, match=r"net\.yaml: nodes\.0\.x: Extra inputs"):
        load_spec(path)
    bad_cidr = "registry: {port: 9000}\nnodes: [{card: a.yaml, port: 9001, allow_cidrs: [nope]}]\n"
    with pytest.raises(ConfigError, match="allow_cidrs"):
        load_spec(_write(tmp_path, bad_cidr))
    with pytest.raises(ConfigError, match="cannot read network file"):
        load_spec(tmp_path / "missing.yaml")


def test_children_get_the_token_through_the_environment_only(tmp_path: Path) -> None:
    network = Network(load_spec(LOCAL), spec_dir=LOCAL.parent, run_dir=tmp_path)
    argvs = [m.child.argv for m in network.members]
    assert all(network.token not in " ".join(argv) for argv in argvs)
    registry = network.registry.child.argv
    assert registry[registry.index("--token-env") + 1] == TOKEN_ENV
    assert registry[registry.index("--grpc-port") + 1] == "9090"
    assert mask(network.token) == network.token[:4] + "…"
    web = next(m.child.argv for m in network.nodes if m.agent_id == "web")
    assert web[web.index("--allow-cidr") + 1] == "127.0.0.0/8"
    assert web[web.index("--registry") + 1] == "http://127.0.0.1:8090"
    assert web[web.index("--data-dir") + 1] == str(tmp_path / "web")
    assert web[web.index("--grpc-port") + 1] == "9101"


def test_a_table_aligns_its_columns() -> None:
    table = format_table(["ID", "URL"], [["data", "http://a"], ["coordinator", "http://b"]])
    assert table.splitlines() == [
        "ID           URL",
        "data         http://a",
        "coordinator  http://b",
    ]


def test_two_nodes_may_not_share_a_name(tmp_path: Path) -> None:
    card = ROOT / "cards" / "data.yaml"
    nodes = f"[{{card: {card}, port: 9001}}, {{card: {card}, port: 9002}}]"
    spec = load_spec(_write(tmp_path, f"registry: {{port: 9000}}\nnodes: {nodes}\n"))
    with pytest.raises(ConfigError, match="names used twice: data"):
        Network(spec, spec_dir=tmp_path, run_dir=tmp_path)
