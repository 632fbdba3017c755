"""A CA and a server certificate made per run (the `cryptography` package), under the run
directory's `tls/`: the run's clients trust them through the CA file only (curl --cacert),
nothing is installed on the host, and the key never leaves the run directory. The server
certificate names every address of the testbed's hosts (GETs go to addresses, not names)."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

TLS_DIR = "tls"
SERVER_NAME = "server.congestlab.test"
VALID_DAYS = 30


@dataclass(frozen=True)
class RunCertificates:
    ca: Path  # the CA certificate (what clients trust)
    cert: Path  # the server certificate, then the CA (a full chain for servers that want one file)
    key: Path  # the server key (PKCS#8 PEM, mode 0600)
    fingerprint_sha256: str  # of the server certificate's DER, hex with colons

    def record(self) -> dict:
        """What the manifest keeps (paths relative to the run directory)."""
        root = self.ca.parent.parent
        return {"ca": str(self.ca.relative_to(root)), "cert": str(self.cert.relative_to(root)),
                "fingerprint_sha256": self.fingerprint_sha256, "key_type": "ECDSA P-256",
                "subject_alt_names": SERVER_NAME}

    def spki_sha256_b64(self) -> str:
        """The server key's SubjectPublicKeyInfo hash, base64: what a browser is told to trust
        (Chromium's --ignore-certificate-errors-spki-list; traffic/chromium.py)."""
        cert = x509.load_pem_x509_certificate(self.cert.read_bytes())
        spki = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        return base64.b64encode(hashlib.sha256(spki).digest()).decode()


def make_run_certificates(run_dir: Path, addresses: list[str]) -> RunCertificates:
    """A fresh CA and a server certificate for `addresses` (every host's v4 and v6) in
    run_dir/tls/; made once per run (an existing set is reused on --resume)."""
    out = Path(run_dir) / TLS_DIR
    ca_path, cert_path, key_path = out / "ca.pem", out / "server.pem", out / "server.key"
    if not (ca_path.exists() and cert_path.exists() and key_path.exists()):
        out.mkdir(parents=True, exist_ok=True)
        _write_new(ca_path, cert_path, key_path, addresses)
    server = x509.load_pem_x509_certificate(cert_path.read_bytes())
    digest = server.fingerprint(hashes.SHA256()).hex()
    return RunCertificates(ca_path, cert_path, key_path, ":".join(digest[i:i + 2] for i in range(0, len(digest), 2)))


def _write_new(ca_path: Path, cert_path: Path, key_path: Path, addresses: list[str]) -> None:
    now = dt.datetime.now(dt.timezone.utc) - dt.timedelta(minutes=5)  # a client clock a little behind
    until = now + dt.timedelta(days=VALID_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "congestlab run CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(until)
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                       crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    names: list[x509.GeneralName] = [x509.DNSName(SERVER_NAME)]
    names += [x509.IPAddress(ipaddress.ip_address(a)) for a in sorted(set(addresses))]
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, SERVER_NAME)]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(until)
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            # the key identifiers RFC 5280 asks for, which strict verifiers require (OpenSSL's
            # X509_V_FLAG_X509_STRICT, the default of Python's ssl since 3.13; cryptography's)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    key_path.touch(mode=0o600)
    key_path.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    ca_path.write_bytes(ca.public_bytes(pem))
    cert_path.write_bytes(cert.public_bytes(pem) + ca.public_bytes(pem))
