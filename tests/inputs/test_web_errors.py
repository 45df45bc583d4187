"""A failed fetch says what went wrong as a person would ("connection refused", "TLS
handshake failed: …"), never urllib3's pools and retries, against real loopback servers:
a closed port, TLS with a self-signed certificate made at test time, servers that hang up or answer
in something that is not HTTP."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from flexmatch.errors import WebImportError
from flexmatch.inputs.sources.fetch import request
from flexmatch.inputs.sources.web_policy import WebPolicy
from tests.conftest import run, write_config

POLICY = WebPolicy(allow_hosts=frozenset({"127.0.0.1"}), timeout=5)
WRAPPERS = ("Pool(", "Max retries", "Caused by", "NewConnectionError", "object at 0x")


def _serve(answer: Callable[[socket.socket], None]) -> Iterator[int]:
    """A loopback TCP server calling ``answer`` with each connection; yields its port."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def loop() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            with connection, contextlib.suppress(OSError, ssl.SSLError):
                answer(connection)

    threading.Thread(target=loop, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def _read_request(connection: socket.socket) -> None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(4096)
        if not chunk:
            return
        data += chunk


def _certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1, valid today."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(days=1), now + datetime.timedelta(days=1)

    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def _tls_server(folder: Path) -> Iterator[int]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*_certificate(folder))

    def answer(connection: socket.socket) -> None:
        with context.wrap_socket(connection, server_side=True) as tls:
            _read_request(tls)
            tls.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<p>hi</p>")

    yield from _serve(answer)


@pytest.fixture
def self_signed(tmp_path: Path) -> Iterator[int]:
    yield from _tls_server(tmp_path)


@pytest.fixture
def plain_http() -> Iterator[int]:
    def answer(connection: socket.socket) -> None:
        connection.recv(4096)  # a TLS hello, read as if it were a request
        connection.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<p>hi</p>")

    yield from _serve(answer)


@pytest.fixture
def hangs_up() -> Iterator[int]:
    yield from _serve(_read_request)  # reads the request, closes without a word


@pytest.fixture
def not_http() -> Iterator[int]:
    def answer(connection: socket.socket) -> None:
        _read_request(connection)
        connection.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

    yield from _serve(answer)


def closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there now
    return port


def _error(url: str) -> str:
    with pytest.raises(WebImportError) as failed:
        request(url, POLICY)
    message = str(failed.value)
    assert not [w for w in WRAPPERS if w in message], message
    return message


def test_connection_refused() -> None:
    url = f"http://127.0.0.1:{closed_port()}/"
    assert _error(url) == f"{url}: connection refused"


def test_tls_with_a_certificate_nobody_signed(self_signed: int) -> None:
    url = f"https://127.0.0.1:{self_signed}/"
    assert _error(url) == (
        f"{url}: TLS handshake failed: certificate verify failed: self-signed certificate"
    )


def test_https_to_a_plain_http_server(plain_http: int) -> None:
    url = f"https://127.0.0.1:{plain_http}/"
    assert _error(url) == f"{url}: TLS handshake failed: wrong version number"


def test_a_server_that_hangs_up_or_speaks_something_else(hangs_up: int, not_http: int) -> None:
    url = f"http://127.0.0.1:{hangs_up}/"
    assert _error(url) == f"{url}: the server closed the connection without answering"
    url = f"http://127.0.0.1:{not_http}/"
    assert _error(url) == (
        f"{url}: the server did not answer in HTTP (it sent 'SSH-2.0-OpenSSH_9.6\\r\\n')"
    )


def test_an_unknown_host() -> None:
    message = _error("http://no-such-host.invalid/")
    assert message.startswith("http://no-such-host.invalid/: cannot resolve host ")
    assert "[Errno" not in message


def test_the_cli_says_it_plainly(tmp_path: Path) -> None:
    write_config(tmp_path / "kb", "sources:\n  default:\n    allow_hosts: ['127.0.0.1']\n")
    url = f"http://127.0.0.1:{closed_port()}/"
    done = run("ingest", "--kb", str(tmp_path / "kb"), url)
    assert f"{url}: connection refused" in done.stdout + done.stderr
    assert "Max retries" not in done.stdout + done.stderr
