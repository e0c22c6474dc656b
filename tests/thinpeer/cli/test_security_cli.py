"""`certs init`, `token issue`, and a `network up` on keys made beforehand: what a user types,
real processes, real TLS."""

from __future__ import annotations

import stat
import subprocess
import sys

import jwt
from cryptography import x509
import pytest

from conftest import ROOT
from thinpeer.client import SuperPeerClient, ThinPeerError
from thinpeer.credentials import Credentials
from thinpeer.ops.processes import up
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.topologies import shipped_topology

CLI = [sys.executable, "-m", "thinpeer.cli"]


def sg(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_certs_and_tokens_from_the_command_line(tmp_path) -> None:
    keys = tmp_path / "keys"
    made = sg("certs", "init", "--topology", "paper-example", "--out", str(keys), "--host", "sg.example.org")
    assert made.returncode == 0, made.stderr
    for name in ("ca.pem", "ca.key", "token.key", "token.pub", "SP0.pem", "SP7.key"):
        assert (keys / name).is_file(), name
    assert stat.S_IMODE((keys / "SP7.key").stat().st_mode) == 0o600
    cert = x509.load_pem_x509_certificate((keys / "SP3.pem").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert {"SP3", "sg.example.org", "localhost"} <= set(names)
    issued = sg("token", "issue", "--keys", str(keys), "--user", "alice", "--publish", "photons", "--subscribe",
                "--expires", "2h")
    assert issued.returncode == 0, issued.stderr
    claims = jwt.decode(issued.stdout.strip(), (keys / "token.pub").read_bytes(), algorithms=["EdDSA"],
                        issuer="streamglobe")
    assert (claims["sub"], claims["publish"], claims["subscribe"], claims["admin"]) == ("alice", ["photons"], True, False)
    assert 7100 < claims["exp"] - claims["iat"] <= 7200
    bad = sg("token", "issue", "--keys", str(keys), "--user", "alice", "--expires", "soon")
    assert bad.returncode == 1 and "not a duration" in bad.stderr
    nokeys = sg("token", "issue", "--keys", str(tmp_path / "nowhere"), "--user", "alice")
    assert nokeys.returncode == 1 and "certs init" in nokeys.stderr


@pytest.mark.slow
def test_network_up_on_keys_made_beforehand(tmp_path) -> None:
    keys = tmp_path / "keys"
    assert sg("certs", "init", "--topology", "paper-example", "--out", str(keys)).returncode == 0
    topology = with_free_ports(shipped_topology("paper-example"), tmp_path / "t.toml")
    network = up(topology, state_dir=tmp_path / "state", secure=True, keys=keys)
    try:
        assert network.client("SP4").status()["superpeer"] == "SP4"  # the admin token it issued
        token = sg("token", "issue", "--keys", str(keys), "--user", "carol", "--subscribe").stdout.strip()
        carol = SuperPeerClient(network.addresses["SP4"], credentials=Credentials((keys / "ca.pem").read_bytes(), token))
        seen = carol.status()
        assert len(seen.pop("backbone")["superpeer"]) == 8  # no one's secret: the web view draws it
        assert seen == {"superpeer": "SP4", "user": "carol", "subscriptions": {}, "streams_registered_here": {}}
        with pytest.raises(ThinPeerError) as denied:
            carol.register_stream("photons", "photons", "photon")
        assert denied.value.code == "PERMISSION_DENIED"
    finally:
        network.stop()
