"""UrlGuard.fetch over HTTPS through the node's outbound client (httpx over aiohttp).

The guard connects to the IP it checked and passes the name as ``sni_hostname``; the transport
must still send that name and verify the certificate against it, not against the address.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from node.errors import ToolError
from node.outbound_http import outbound_client
from node.tooling.guards import UrlGuard
from tests.servers import free_socket

pytestmark = pytest.mark.network


def self_signed(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A certificate for ``name`` (signed by itself) and its key, as PEM files."""
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


@contextlib.asynccontextmanager
async def tls_server(cert: Path, key: Path) -> AsyncIterator[int]:
    async def hello(request: Request) -> PlainTextResponse:
        return PlainTextResponse(f"hello {request.headers['host']}")

    app = Starlette(routes=[Route("/", hello)])
    sock = free_socket()
    config = uvicorn.Config(
        app, log_level="warning", ssl_certfile=str(cert), ssl_keyfile=str(key), lifespan="off"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    deadline = time.monotonic() + 10
    while not server.started:
        assert not task.done() and time.monotonic() < deadline, "TLS server did not start"
        await asyncio.sleep(0.01)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=10)
        sock.close()


@pytest.mark.usefixtures("localhost_only")
async def test_the_guard_checks_the_certificate_for_the_name_not_the_address(
    tmp_path: Path,
) -> None:
    """UrlGuard connects to the checked IP; TLS still names (SNI) and verifies the host."""
    good, good_key = self_signed(tmp_path, "localhost")
    other, other_key = self_signed(tmp_path, "other.test")
    guard = UrlGuard(allow_cidrs=["127.0.0.1/32"])
    for cert, key, ok in ((good, good_key, True), (other, other_key, False)):
        trust = ssl.create_default_context(cafile=str(cert))
        async with tls_server(cert, key) as port, outbound_client(timeout=5, verify=trust) as http:
            url = f"https://localhost:{port}/"
            if ok:
                response = await guard.fetch(http, "GET", url)
                assert response.text == f"hello localhost:{port}"
            else:
                with pytest.raises(ToolError, match="ConnectError"):
                    await guard.fetch(http, "GET", url)
