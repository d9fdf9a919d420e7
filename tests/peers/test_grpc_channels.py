from __future__ import annotations

import grpc
import pytest

from node.errors import ConfigError
from node.peers.grpc_channels import GrpcChannels, grpc_target


def test_grpc_addresses_are_read_in_every_form_cards_use() -> None:
    assert grpc_target("127.0.0.1:50051") == ("127.0.0.1:50051", False)
    assert grpc_target("grpc://agent.example:7000") == ("agent.example:7000", False)
    assert grpc_target("http://agent.example:7000/") == ("agent.example:7000", False)
    assert grpc_target("grpcs://agent.example") == ("agent.example:443", True)
    assert grpc_target("https://[::1]:8443") == ("[::1]:8443", True)
    for bad in ("ftp://h:1", "agent.example", "grpc://:1", "h:99999"):
        with pytest.raises(ConfigError, match="gRPC address"):
            grpc_target(bad)


async def test_one_channel_per_target_closed_together() -> None:
    channels = GrpcChannels()
    plain = channels("127.0.0.1:9")
    assert channels("grpc://127.0.0.1:9") is plain
    assert channels("http://127.0.0.1:9/a2a") is plain
    tls = channels("grpcs://127.0.0.1:9")
    assert tls is not plain
    await channels.aclose()
    assert plain.get_state() == grpc.ChannelConnectivity.SHUTDOWN
    assert tls.get_state() == grpc.ChannelConnectivity.SHUTDOWN
    assert channels("127.0.0.1:9") is not plain  # a new one after close
    await channels.aclose()
