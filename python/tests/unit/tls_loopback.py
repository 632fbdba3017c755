"""A TLS file server on loopback for the clients' tests: Python's http.server behind the
run's own certificate (servers/tls.py), serving /1KiB.bin, HTTP/1.x over TCP only."""

from __future__ import annotations

import ssl
import threading
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

from congestlab.servers.tls import RunCertificates, make_run_certificates
from congestlab.traffic.http_request import url_for


@contextmanager
def tls_file_server(tmp_path, protocol: str = "HTTP/1.1", certs: RunCertificates | None = None):
    """Yields (the URL of /1KiB.bin, the certificates); `protocol`: what it answers in."""
    docroot = tmp_path / "docroot"
    docroot.mkdir(exist_ok=True)
    (docroot / "1KiB.bin").write_bytes(b"x" * 1024)
    certs = certs or make_run_certificates(tmp_path / "run", ["127.0.0.1"])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.cert, certs.key)
    handler = type("Handler", (SimpleHTTPRequestHandler,), {"protocol_version": protocol,
                                                            "log_message": lambda *args: None})
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(handler, directory=str(docroot)))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield url_for("127.0.0.1", server.server_address[1], "/1KiB.bin", tls=True), certs
    finally:
        server.shutdown()
        server.server_close()
