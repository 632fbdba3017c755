"""The run's own CA and server certificate (servers/tls.py): the certificate verifies against
the CA for each testbed address, the key is private to its owner, the recorded fingerprint is
openssl's, and a resumed run reuses the files."""

from __future__ import annotations

import ipaddress
import socket
import ssl
import shutil
import stat
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509 import verification

from congestlab.servers.tls import SERVER_NAME, make_run_certificates

ADDRESSES = ["10.9.1.2", "fd00:9:0:1::2", "10.9.0.2", "fd00:9:0:0::2"]
needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")


@pytest.fixture
def certs(tmp_path):
    return make_run_certificates(tmp_path / "run", ADDRESSES)


def test_the_files_are_in_the_run_directorys_tls_folder(certs, tmp_path):
    tls = tmp_path / "run" / "tls"
    assert (certs.ca, certs.cert, certs.key) == (tls / "ca.pem", tls / "server.pem", tls / "server.key")
    assert certs.record() == {"ca": "tls/ca.pem", "cert": "tls/server.pem",
                              "fingerprint_sha256": certs.fingerprint_sha256, "key_type": "ECDSA P-256",
                              "subject_alt_names": SERVER_NAME}


def test_the_server_certificate_verifies_against_the_ca_for_every_address(certs):
    ca = x509.load_pem_x509_certificate(certs.ca.read_bytes())
    server, *chain = x509.load_pem_x509_certificates(certs.cert.read_bytes())
    assert chain == [ca]  # the full chain in one file, the CA after the server's
    store = verification.Store([ca])
    for address in ADDRESSES:
        verifier = verification.PolicyBuilder().store(store).build_server_verifier(
            x509.IPAddress(ipaddress.ip_address(address)))
        assert verifier.verify(server, [])[-1] == ca
    other = verification.PolicyBuilder().store(store).build_server_verifier(
        x509.IPAddress(ipaddress.ip_address("10.9.1.3")))
    with pytest.raises(verification.VerificationError):
        other.verify(server, [])


def test_the_certificate_names_the_addresses_given_and_the_servers_name(certs):
    server = x509.load_pem_x509_certificates(certs.cert.read_bytes())[0]
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sorted(names.get_values_for_type(x509.IPAddress), key=str) == sorted(
        (ipaddress.ip_address(a) for a in ADDRESSES), key=str)
    assert names.get_values_for_type(x509.DNSName) == [SERVER_NAME]
    usage = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]


def test_the_key_is_the_certificates_and_only_its_owner_reads_it(certs):
    assert stat.S_IMODE(certs.key.stat().st_mode) == 0o600
    key = serialization.load_pem_private_key(certs.key.read_bytes(), password=None)
    server = x509.load_pem_x509_certificates(certs.cert.read_bytes())[0]
    assert key.public_key().public_numbers() == server.public_key().public_numbers()


@needs_openssl
def test_strict_openssl_verifies_it_against_the_ca_alone(certs, tmp_path):
    leaf = tmp_path / "leaf.pem"
    leaf.write_bytes(x509.load_pem_x509_certificates(certs.cert.read_bytes())[0].public_bytes(
        serialization.Encoding.PEM))
    out = subprocess.run(["openssl", "verify", "-x509_strict", "-CAfile", str(certs.ca), "-purpose", "sslserver", str(leaf)],
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == f"{leaf}: OK", out.stdout + out.stderr


@needs_openssl
def test_the_fingerprint_is_openssls_sha256_of_the_server_certificate(certs):
    out = subprocess.run(["openssl", "x509", "-noout", "-fingerprint", "-sha256", "-in", str(certs.cert)],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip().split("=", 1)[1].lower() == certs.fingerprint_sha256
    assert len(certs.fingerprint_sha256.split(":")) == 32


def test_a_second_call_reuses_the_files(certs, tmp_path):
    before = {p: p.read_bytes() for p in (certs.ca, certs.cert, certs.key)}
    again = make_run_certificates(tmp_path / "run", ["192.0.2.1"])  # a resume: the run's set stands
    assert again == certs
    assert {p: p.read_bytes() for p in (again.ca, again.cert, again.key)} == before


def test_another_run_gets_its_own_ca(certs, tmp_path):
    other = make_run_certificates(tmp_path / "other", ADDRESSES)
    assert other.ca.read_bytes() != certs.ca.read_bytes()
    assert other.fingerprint_sha256 != certs.fingerprint_sha256


def test_a_strict_tls_client_trusting_the_ca_file_only_accepts_the_server(certs):
    """A handshake over a socket pair: the server presents the chain, the client (Python's ssl,
    strict as it is by default from 3.13) trusts the run's CA only and checks the address."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(certs.cert, certs.key)
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.load_verify_locations(cafile=certs.ca)
    client_ctx.verify_flags |= ssl.VERIFY_X509_STRICT
    a, b = socket.socketpair()
    with a, b, ThreadPoolExecutor(1) as pool:
        served = pool.submit(lambda: server_ctx.wrap_socket(b, server_side=True).version())
        client = client_ctx.wrap_socket(a, server_hostname=ADDRESSES[1])
        assert client.version() == served.result(timeout=10)
        assert client.getpeercert()["subjectAltName"][0] == ("DNS", SERVER_NAME)
