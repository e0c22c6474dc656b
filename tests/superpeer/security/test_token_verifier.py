"""A token verified once is remembered with its grant, and still refused once it expires; a
changed token is verified afresh (``superpeer.security.tokens.TokenVerifier``)."""

from __future__ import annotations

import time

import pytest

from superpeer.errors import NodeError
from superpeer.security import tokens
from superpeer.security.tokens import AUTHORIZATION, LEEWAY_S, TokenVerifier
from thinpeer.ops.certs import init_backbone
from thinpeer.ops.tokens import issue_token


def bearer(token: str) -> list[tuple[str, str]]:
    return [(AUTHORIZATION, f"Bearer {token}")]


@pytest.fixture
def keys(tmp_path):
    return init_backbone(tmp_path / "keys", {"SP1": ["localhost"]})


def test_a_remembered_token_is_refused_once_it_expires(keys, monkeypatch) -> None:
    verifier = TokenVerifier((keys / "token.pub").read_bytes())
    token = issue_token(keys, "alice", ["photons"], subscribe=True, expires_s=100)
    grant = verifier.grant(bearer(token))
    assert grant.user == "alice" and grant.may_publish("photons") and not grant.may_publish("x")
    assert verifier.grant(bearer(token)) is grant  # (remembered: not verified again)
    later = time.time() + 100 + LEEWAY_S + 1
    monkeypatch.setattr(tokens.time, "time", lambda: later)
    with pytest.raises(NodeError, match="expired"):
        verifier.grant(bearer(token))
    assert token not in verifier._verified  # (forgotten: verified afresh, by PyJWT's clock, if sent again)


def test_a_changed_token_is_not_taken_for_a_remembered_one(keys) -> None:
    verifier = TokenVerifier((keys / "token.pub").read_bytes())
    token = issue_token(keys, "alice", ["photons"], subscribe=True)
    verifier.grant(bearer(token))
    head, claims, signature = token.split(".")
    forged = ".".join((head, claims, signature[:-4] + ("AAAA" if signature[-4:] != "AAAA" else "BBBB")))
    with pytest.raises(NodeError, match="signature"):
        verifier.grant(bearer(forged))
    other = TokenVerifier((init_backbone(keys.parent / "other", {"SP1": ["localhost"]}) / "token.pub").read_bytes())
    with pytest.raises(NodeError, match="signature"):
        other.grant(bearer(token))


def test_only_so_many_tokens_are_remembered(keys, monkeypatch) -> None:
    monkeypatch.setattr(tokens, "VERIFIED_TOKENS", 3)
    verifier = TokenVerifier((keys / "token.pub").read_bytes())
    for k in range(5):
        verifier.grant(bearer(issue_token(keys, f"user{k}", subscribe=True)))
    assert list(g.user for g in verifier._verified.values()) == ["user2", "user3", "user4"]
