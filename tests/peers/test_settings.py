from __future__ import annotations

import pytest
from pydantic import ValidationError

from node.errors import ConfigError
from node.peers.settings import PeersSettings, StaticPeer, read_token


def test_defaults() -> None:
    settings = PeersSettings()
    assert settings.static == []
    assert settings.registry is None
    assert (settings.max_hops, settings.call_timeout_s, settings.retries) == (4, 30.0, 3)


def test_unknown_keys_and_bad_values_are_refused() -> None:
    with pytest.raises(ValidationError):
        PeersSettings.model_validate({"static": [{"url": "http://x", "token": "inline"}]})
    with pytest.raises(ValidationError):
        StaticPeer(url="ftp://x")
    with pytest.raises(ValidationError):
        PeersSettings(max_hops=0)


def test_tokens_are_read_from_the_environment_at_use(monkeypatch: pytest.MonkeyPatch) -> None:
    assert read_token(None) is None
    monkeypatch.delenv("PEER_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="PEER_TOKEN"):
        read_token("PEER_TOKEN")
    monkeypatch.setenv("PEER_TOKEN", "abc")
    assert read_token("PEER_TOKEN") == "abc"
    assert "abc" not in StaticPeer(url="http://x", token_env="PEER_TOKEN").model_dump_json()
