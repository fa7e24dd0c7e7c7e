"""Test helpers for OAuth: a self-signed certificate, a local HTTPS server of client metadata
documents (allowed explicitly with TOOLHUB_OAUTH_CIMD_TRUSTED_ORIGINS), and PKCE values."""

import base64
import datetime
import hashlib
import ipaddress
import json
import secrets
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# The redirect URI of the test clients (a loopback address, as a native client's).
CALLBACK = "http://127.0.0.1:53682/callback"


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate (its own CA) for localhost and 127.0.0.1: (certificate file, key file)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "cimd-cert.pem", directory / "cimd-key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_file, key_file


class DocumentServer:
    """HTTPS on 127.0.0.1: `documents[path]` is served as JSON (bytes as they are); `delays[path]` seconds of
    waiting first. `drips[path]`: the whole response (status line, headers, a document far over any cap) one
    byte every that many seconds, until the client hangs up. `floods`: paths answered with an endless body as
    fast as the client reads. Counts the requests it answered per path and the bytes sent per path."""

    def __init__(self, cert_file: Path, key_file: Path) -> None:
        self.documents: dict[str, object] = {}
        self.delays: dict[str, float] = {}
        self.drips: dict[str, float] = {}
        self.floods: set[str] = set()
        self.hits: dict[str, int] = {}
        self.sent: dict[str, int] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _drip(self, path: str, every: float) -> None:
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
                for byte in head + b'{"padding": "' + b"x" * 100_000:
                    try:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    except OSError:
                        return
                    server.sent[path] = server.sent.get(path, 0) + 1
                    time.sleep(every)

            def _flood(self, path: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                chunk = b'{"padding": "' + b"x" * 65536
                for _ in range(1000):  # 64 MB at most
                    try:
                        self.wfile.write(chunk)
                    except OSError:
                        return
                    server.sent[path] = server.sent.get(path, 0) + len(chunk)

            def do_GET(self):  # noqa: N802 (http.server's name)
                path = self.path
                server.hits[path] = server.hits.get(path, 0) + 1
                if path in server.drips:
                    self._drip(path, server.drips[path])
                    return
                if path in server.floods:
                    self._flood(path)
                    return
                time.sleep(server.delays.get(path, 0))
                document = server.documents.get(path)
                if document is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                body = document if isinstance(document, bytes) else json.dumps(document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.origin = f"localhost:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"https://localhost:{self.port}{path}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def pkce_pair() -> tuple[str, str]:
    """(verifier, S256 challenge)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge
