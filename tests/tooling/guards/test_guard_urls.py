from __future__ import annotations

from ipaddress import ip_address

import pytest

from node.errors import ConfigError, GuardError
from node.tooling.guards import UrlGuard, is_public_address


@pytest.mark.parametrize(
    "ip",
    ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1"],
)
def test_public_addresses(ip: str) -> None:
    assert is_public_address(ip)
    assert is_public_address(ip_address(ip))


@pytest.mark.parametrize(
    "ip",
    [
        "127.0.0.1",  # loopback
        "10.1.2.3",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.1",  # private
        "169.254.169.254",  # link-local, cloud metadata
        "100.64.0.1",
        "100.127.255.254",  # CGNAT
        "0.0.0.0",  # unspecified
        "224.0.0.1",  # multicast
        "240.0.0.1",  # reserved
        "255.255.255.255",
        "192.0.2.1",  # documentation
        "::1",
        "::",
        "fc00::1",
        "fd12:3456::1",  # unique local
        "fe80::1",  # link-local
        "ff02::1",  # multicast
        "::ffff:127.0.0.1",  # IPv4-mapped loopback
        "::ffff:10.0.0.1",
        "::ffff:169.254.169.254",
        "::127.0.0.1",  # IPv4-compatible
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2002:a00:1::",  # 6to4 of 10.0.0.1
        "2001::1",  # teredo
        "64:ff9b::a00:1",  # NAT64 of 10.0.0.1
        "2001:db8::1",  # documentation
    ],
)
def test_non_public_addresses(ip: str) -> None:
    assert not is_public_address(ip)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://127.0.0.1:8080/admin",
        "http://10.0.0.1/",
        "http://172.16.5.4/",
        "http://192.168.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://100.64.0.1/",
        "http://[::1]/",
        "http://[fc00::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://0.0.0.0/",
        "https://[::]:443/",
        "http://2130706433/",  # 127.0.0.1 as a decimal integer
        "http://127.1/",  # short form
        "http://0x7f.1/",  # hex form
    ],
)
async def test_non_public_urls_are_refused(url: str) -> None:
    with pytest.raises(GuardError, match="non-public"):
        await UrlGuard().check(url)


@pytest.mark.parametrize(
    "url", ["ftp://example.org/", "file:///etc/passwd", "gopher://x/", "javascript:alert(1)"]
)
async def test_non_http_schemes_are_refused(url: str) -> None:
    with pytest.raises(GuardError, match="only http and https"):
        await UrlGuard().check(url)


@pytest.mark.parametrize("url", ["http:///path", "http://", "https://:80/"])
async def test_missing_host_is_refused(url: str) -> None:
    with pytest.raises(GuardError):
        await UrlGuard().check(url)


async def test_unresolvable_name_is_refused() -> None:
    with pytest.raises(GuardError, match="does not resolve"):
        await UrlGuard().check("http://no-such-host.invalid/")


async def test_public_literal_passes_without_dns() -> None:
    assert await UrlGuard().check("https://8.8.8.8/dns") == [ip_address("8.8.8.8")]


async def test_allowed_cidr_lets_loopback_through() -> None:
    guard = UrlGuard(allow_cidrs=["127.0.0.1/32"])
    assert await guard.check("http://127.0.0.1:9/") == [ip_address("127.0.0.1")]
    assert await guard.check("http://[::ffff:127.0.0.1]:9/") == [ip_address("::ffff:127.0.0.1")]
    with pytest.raises(GuardError):
        await guard.check("http://127.0.0.2/")
    with pytest.raises(GuardError):
        await guard.check("http://[::1]/")


async def test_allowed_v6_cidr() -> None:
    guard = UrlGuard(allow_cidrs=["fd00::/8"])
    assert await guard.check("http://[fd00::5]/") == [ip_address("fd00::5")]
    with pytest.raises(GuardError):
        await guard.check("http://[fc00::5]/")


def test_bad_configuration_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        UrlGuard(allow_cidrs=["not-a-cidr"])
    with pytest.raises(ConfigError):
        UrlGuard(max_redirects=-1)
