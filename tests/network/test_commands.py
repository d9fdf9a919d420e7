"""Argument and error handling of the ``registry`` and ``agents`` commands (no servers started)."""

from __future__ import annotations

import pytest
from netsupport import free_ports

from node.cli import main


def test_registry_refuses_a_token_variable_that_is_unset(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("A2A_TEST_UNSET_TOKEN", raising=False)
    assert main(["registry", "--token-env", "A2A_TEST_UNSET_TOKEN"]) == 2
    assert "A2A_TEST_UNSET_TOKEN (the registry token) is unset" in capsys.readouterr().err


def test_registry_refuses_open_writes_on_a_public_address(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["registry", "--host", "0.0.0.0"]) == 2
    assert "refusing to bind 0.0.0.0 with open writes" in capsys.readouterr().err


def test_registry_reports_invalid_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["registry", "--allow-cidr", "not-a-network"]) == 2
    assert "allow_cidrs" in capsys.readouterr().err


def test_agents_names_a_registry_it_cannot_reach(capsys: pytest.CaptureFixture[str]) -> None:
    (port,) = free_ports(1)
    assert main(["agents", f"http://127.0.0.1:{port}"]) == 1
    assert f"cannot list agents at http://127.0.0.1:{port}/v1/agents" in capsys.readouterr().err
