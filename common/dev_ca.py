"""A development certificate authority for local TLS clusters (`rafka up --security-protocol SSL`).

Under ``<data-dir>/tls/``: ``ca.pem`` (what clients trust: ``ssl.ca.location``), ``ca-key.pem``,
and one ``broker-<id>.pem`` per broker holding its key and certificate chain (the broker's
``ssl.keystore.location``), valid for 127.0.0.1 and localhost. The CA is kept across runs, so
clients configured once keep working; not for production: the CA key sits beside the data.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_FILE = "ca.pem"
_CA_KEY_FILE = "ca-key.pem"
_VALID_DAYS = 365
_RENEW_BEFORE = datetime.timedelta(days=7)


def tls_dir(data_dir: Path) -> Path:
    return data_dir / "tls"


def ensure_ca(directory: Path) -> Path:
    """The CA certificate under `directory`, created on first use; returns ca.pem's path."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_path = directory / CA_FILE
    if not (ca_path.exists() and (directory / _CA_KEY_FILE).exists()) or _expiring(ca_path):
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Rafka development CA")])
        cert = (
            _builder(name, name, key.public_key(), days=10 * _VALID_DAYS)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        _write_private(directory / _CA_KEY_FILE, _key_pem(key))
        _write_private(ca_path, cert.public_bytes(serialization.Encoding.PEM), mode=0o644)
    return ca_path


def issue_certificate(
    directory: Path,
    file_name: str,
    common_name: str,
    *,
    server: bool,
    client: bool = False,
    subject: list[tuple[x509.ObjectIdentifier, str]] | None = None,
) -> Path:
    """Issue a certificate signed by the CA of `directory` (created if needed) into one PEM file
    with the key first, then the certificate and the CA (Kafka's PEM keystore layout; librdkafka
    reads it as both ssl.certificate.location and ssl.key.location). A server certificate names
    127.0.0.1 and localhost, and with `client` serves as a client certificate too; `subject` adds
    attributes after the CN (e.g. OU, O)."""
    ensure_ca(directory)
    ca_cert = x509.load_pem_x509_certificate((directory / CA_FILE).read_bytes())
    ca_key = serialization.load_pem_private_key((directory / _CA_KEY_FILE).read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name(
        [x509.NameAttribute(oid, value) for oid, value in reversed(subject or [])]
        + [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    )
    usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
    usages += [ExtendedKeyUsageOID.CLIENT_AUTH] if client or not server else []
    builder = (
        _builder(name, ca_cert.subject, key.public_key(), days=_VALID_DAYS)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
    cert = builder.sign(ca_key, hashes.SHA256())
    path = directory / file_name
    _write_private(
        path,
        _key_pem(key)
        + cert.public_bytes(serialization.Encoding.PEM)
        + ca_cert.public_bytes(serialization.Encoding.PEM),
    )
    return path


def ensure_broker_certificate(directory: Path, node_id: int) -> Path:
    """``broker-<id>.pem`` (key + chain), issued again when missing, expiring or from an
    earlier CA."""
    path = directory / f"broker-{node_id}.pem"
    ca_path = ensure_ca(directory)
    if path.exists() and not _expiring(path) and _issued_by(path, ca_path):
        return path
    return issue_certificate(directory, path.name, f"broker-{node_id}", server=True)


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey, days: int
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
    )


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write_private(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write a file (by default one only its owner reads), replacing it atomically: a broker
    watching it never reads half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _first_certificate(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificates(path.read_bytes())[0]


def _expiring(path: Path) -> bool:
    cert = _first_certificate(path)
    return cert.not_valid_after_utc - _RENEW_BEFORE < datetime.datetime.now(datetime.UTC)


def _issued_by(path: Path, ca_path: Path) -> bool:
    try:
        _first_certificate(path).verify_directly_issued_by(_first_certificate(ca_path))
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
