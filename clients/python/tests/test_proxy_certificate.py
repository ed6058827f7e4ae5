"""The TLS listener's certificate is checked for http and https URLs alike, against a real
`proxypool dev`: an impostor between the client and the gateway (a TLS server whose
certificate another CA issued, relaying what it reads to the gateway's plain listener) gets
no byte from a `GatewaySession`, so never its `Proxy-Authorization`.

Why the package must do it: through an https proxy, `requests` (2.34) sends an http URL to
the proxy in absolute form over TLS (urllib3's forwarding mode), and its
`HTTPAdapter.cert_verify` looks at the URL's scheme alone, so it sets `CERT_NONE` on the
pool to the proxy: urllib3 (2.7) then shakes hands with the proxy unverified and warns
`InsecureRequestWarning`. For an https URL (a CONNECT tunnel) urllib3's
`_connect_tls_proxy` checks the proxy against the same `verify` bundle as the site.
`requests` never passes urllib3's `proxy_ssl_context`."""

from __future__ import annotations

import datetime
import ipaddress
import socket
import ssl
import threading
import warnings
from pathlib import Path
from typing import Iterator, List

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from urllib3.exceptions import InsecureRequestWarning

from conftest import HttpsDev, bundle
from proxypool_client import GatewaySession

REFUSED = (requests.exceptions.SSLError, requests.exceptions.ProxyError)


def _name(text: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


def _write_ca_and_leaf(directory: Path) -> "tuple[Path, Path, Path]":
    """A CA of the impostor's own and a leaf it issued for 127.0.0.1 and localhost: the
    CA's, the leaf's and the leaf key's PEM paths."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("impostor ca"))
        .issuer_name(_name("impostor ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name("impostor"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = (directory / "impostor-ca.pem", directory / "impostor.pem", directory / "impostor.key")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


class Impostor:
    """A TLS listener on loopback with a certificate of its own CA that relays the
    plaintext it reads to `upstream` (the gateway's plain HTTP listener), keeping a copy."""

    def __init__(self, directory: Path, upstream: "tuple[str, int]") -> None:
        self.ca, cert, key = _write_ca_and_leaf(directory)
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.host, self.port = self.listener.getsockname()[:2]
        self._read = bytearray()
        self._lock = threading.Lock()
        self._sockets: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def read(self) -> bytes:
        """Every plaintext byte clients sent it so far."""
        with self._lock:
            return bytes(self._read)

    def close(self) -> None:
        self.listener.close()
        for sock in self._sockets:
            sock.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        client.settimeout(10)
        try:
            tls = self.context.wrap_socket(client, server_side=True)
        except (OSError, ssl.SSLError):
            # The client refused the certificate: nothing was sent.
            client.close()
            return
        gateway = socket.create_connection(self.upstream, timeout=10)
        self._sockets += [tls, gateway]
        threading.Thread(target=self._pump, args=(gateway, tls, False), daemon=True).start()
        self._pump(tls, gateway, True)

    def _pump(self, source: socket.socket, sink: socket.socket, record: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if record:
                    with self._lock:
                        self._read += data
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


@pytest.fixture()
def impostor(https_dev: HttpsDev, tmp_path: Path) -> Iterator[Impostor]:
    relay = Impostor(tmp_path, (https_dev.dev.host, https_dev.dev.port))
    yield relay
    relay.close()


def through(https_dev: HttpsDev, host: str, port: int, verify: str) -> GatewaySession:
    dev = https_dev.dev
    return GatewaySession(dev.client, dev.password, host, port, scheme="https", verify=verify)


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_a_proxy_certificate_of_another_ca_gets_nothing(
    https_dev: HttpsDev, impostor: Impostor, tmp_path: Path, scheme: str
) -> None:
    # What a client of the listener trusts: its CA, and the site's for a plain tunnel.
    trusted = bundle(tmp_path, https_dev.tls_ca, https_dev.site_ca)
    url = https_dev.dev.site if scheme == "http" else https_dev.site
    with through(https_dev, impostor.host, impostor.port, trusted) as http:
        with pytest.raises(REFUSED, match="CERTIFICATE_VERIFY_FAILED"):
            http.get(url, timeout=10)
    assert impostor.read() == b"", "not a byte, so not the credentials, reached the impostor"


def test_the_impostor_relays_for_a_client_that_trusts_it(
    https_dev: HttpsDev, impostor: Impostor, tmp_path: Path
) -> None:
    # The refusal above is the certificate's doing: trusted, the impostor carries the
    # requests to the gateway, and reads the credentials on the way.
    trusting = bundle(tmp_path, str(impostor.ca), https_dev.site_ca)
    for url in (https_dev.dev.site, https_dev.site):
        with through(https_dev, impostor.host, impostor.port, trusting) as http:
            answer = http.get(url, timeout=10)
        assert answer.status_code == 200, answer.text
    assert b"Proxy-Authorization: Basic " in impostor.read()


def test_the_listener_is_verified_for_an_http_url_without_a_warning(https_dev: HttpsDev, tmp_path: Path) -> None:
    trusted = bundle(tmp_path, https_dev.tls_ca)
    with warnings.catch_warnings():
        # urllib3 warns when neither the site nor the proxy was verified.
        warnings.simplefilter("error", InsecureRequestWarning)
        with through(https_dev, https_dev.tls_host, https_dev.tls_port, trusted) as http:
            answer = http.get(https_dev.dev.site, timeout=10)
    assert answer.status_code == 200, answer.text
