"""A backbone's certificate authority, its super-peers' certificates and its token key
(``streamglobe certs init``; ``network up``, ``deploy up`` and ``demo`` make one when none is given).

The directory holds:

* ``ca.pem`` / ``ca.key``: the backbone's CA (keep ``ca.key`` offline once the peers have theirs);
* ``<id>.pem`` / ``<id>.key`` per super-peer: its certificate names it (common name and a DNS
  subject alternative name ``<id>``, which is what the other super-peers check when they dial it)
  and the host names and addresses it is reached at, for clients that check those;
* ``token.key`` / ``token.pub``: the Ed25519 key pair thin-peer tokens are signed with
  (``streamglobe token issue``) and verified by every super-peer.

Keys are written owner-readable only. Certificates last ``DAYS`` days; ``certs init`` again
replaces them (tokens stay valid only if ``token.key`` is kept: it is never overwritten).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from superpeer.security.tls import CA_FILE, TOKEN_PUBLIC, peer_files

DAYS = 825
CA_KEY = "ca.key"
TOKEN_KEY = "token.key"


def init_backbone(out: str | Path, peers: dict[str, list[str]]) -> Path:
    """Create (or complete) the directory for super-peers ``peers`` (id -> host names or
    addresses it is reached at). An existing CA and token key are kept; every super-peer
    certificate is issued again."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _load_or_create_ca(out)
    for peer, hosts in peers.items():
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _issue(ca_key, ca_cert, peer, hosts, key)
        cert_path, key_path = peer_files(out, peer)
        _write_key(key_path, key)
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if not (out / TOKEN_KEY).exists():
        token_key = ed25519.Ed25519PrivateKey.generate()
        _write_key(out / TOKEN_KEY, token_key)
        (out / TOKEN_PUBLIC).write_bytes(token_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return out


def ensure_backbone(out: str | Path, peers: dict[str, list[str]]) -> Path:
    """``init_backbone`` unless ``out`` already has a CA and a certificate for every peer
    (kept: tokens issued with its token key stay valid)."""
    out = Path(out)
    if not (out / CA_KEY).exists() or any(not peer_files(out, p)[0].exists() for p in peers):
        init_backbone(out, peers)
    return out


def write_private(path: Path, data: bytes) -> None:
    """Write a secret readable by its owner only (an existing file is narrowed too)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def hosts_of(address: str) -> list[str]:
    """The host part of ``host:port``, plus ``localhost`` for a loopback or unspecified one."""
    host = address.rpartition(":")[0].strip("[]")
    names = [host] if host else []
    if host in ("127.0.0.1", "0.0.0.0", "::1", "::", "localhost", ""):
        names += ["localhost", "127.0.0.1"]
    return list(dict.fromkeys(names))


def topology_hosts(topology) -> dict[str, list[str]]:
    """Per super-peer of a ``superpeer.topology.Topology``, the hosts its two addresses name."""
    return {p: list(dict.fromkeys(hosts_of(topology.address(p)) + hosts_of(topology.peer_address(p))))
            for p in topology.backbone.peers}


def _load_or_create_ca(out: Path) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    if (out / CA_KEY).exists() and (out / CA_FILE).exists():
        key = serialization.load_pem_private_key((out / CA_KEY).read_bytes(), password=None)
        return key, x509.load_pem_x509_certificate((out / CA_FILE).read_bytes())  # type: ignore[return-value]
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "StreamGlobe"),
                      x509.NameAttribute(NameOID.COMMON_NAME, f"StreamGlobe backbone CA {os.urandom(4).hex()}")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    _write_key(out / CA_KEY, key)
    (out / CA_FILE).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert


def _issue(ca_key, ca_cert: x509.Certificate, peer: str, hosts: list[str], key) -> x509.Certificate:
    names: list[x509.GeneralName] = [x509.DNSName(peer)]
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "StreamGlobe"),
                                     x509.NameAttribute(NameOID.COMMON_NAME, peer)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=DAYS))
            .add_extension(x509.SubjectAlternativeName(list(dict.fromkeys(names))), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))


def _write_key(path: Path, key) -> None:
    write_private(path, key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
