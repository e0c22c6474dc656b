"""Attacks through raw gRPC (generated stubs, no CLI) on a secure network (issue 14): each is
refused with the right status code, nothing is delivered that should not be, no daemon falls
over, and a legitimate subscription is still served correctly afterwards.

The network: the paper's example backbone in process, mutual TLS between super-peers on their
peer addresses, TLS and tokens for thin peers on their client addresses (``superpeer.security.tls``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import grpc
import jwt
import pytest
from network_harness import reference_results, running_network, same, until

from photons.generator import generate
from proto import streamglobe_pb2 as pb
from proto import streamglobe_pb2_grpc as pb_grpc
from sharing.scenarios import example_query
from superpeer.control import transactions
from superpeer.errors import NodeError
from superpeer.security.access import UserQuotas
from thinpeer.ops.certs import hosts_of, init_backbone
from thinpeer.ops.tokens import issue_token
from wxquery.operators.count_alignment import Anchor

PHOTONS = [p.to_xml() for p in generate(400, seed=3)]


class Net:
    def __init__(self, topology, peers, keys: Path) -> None:
        self.topology, self.peers, self.keys = topology, peers, keys
        self.ca = (keys / "ca.pem").read_bytes()
        self.tokens = {
            "alice": issue_token(keys, "alice", ["photons"], subscribe=True),
            "bob": issue_token(keys, "bob", ["bobs"], subscribe=True),
            "admin": issue_token(keys, "root", admin=True),
        }

    def thin(self, peer: str, token: str | None) -> pb_grpc.ThinPeerStub:
        creds = grpc.ssl_channel_credentials(self.ca)
        if token:
            creds = grpc.composite_channel_credentials(creds, grpc.access_token_call_credentials(token))
        return pb_grpc.ThinPeerStub(grpc.secure_channel(self.topology.address(peer), creds))

    def backbone(self, peer: str, as_peer: str | None, keys: Path | None = None,
                 address: str | None = None) -> pb_grpc.SuperPeerStub:
        """A super-peer stub at ``peer``'s peer address presenting ``as_peer``'s certificate
        (from ``keys``; None: no client certificate)."""
        keys = keys or self.keys
        if as_peer is None:
            creds = grpc.ssl_channel_credentials(self.ca)
        else:
            creds = grpc.ssl_channel_credentials(self.ca, (keys / f"{as_peer}.key").read_bytes(),
                                                 (keys / f"{as_peer}.pem").read_bytes())
        return pb_grpc.SuperPeerStub(grpc.secure_channel(
            address or self.topology.peer_address(peer), creds,
            options=[("grpc.ssl_target_name_override", peer)]))


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("secure")
    with running_network(tmp, keys=tmp / "keys") as (topology, peers):
        yield Net(topology, peers, tmp / "keys")


def code_of(call) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as err:
        call()
    return err.value.code()


def refused(call, code: grpc.StatusCode, says: str = "") -> None:
    with pytest.raises(grpc.RpcError) as err:
        call()
    assert err.value.code() == code, (err.value.code(), err.value.details())
    assert says in (err.value.details() or ""), err.value.details()


def subscribe(net: Net, peer: str, user: str, query: str) -> str:
    return net.thin(peer, net.tokens[user]).Subscribe(pb.SubscribeRequest(query=query), timeout=30).subscription


def read_all(net: Net, peer: str, user: str, sid: str) -> list[str]:
    stub, got = net.thin(peer, net.tokens[user]), []
    while True:
        reply = stub.ReadResults(pb.ReadResultsRequest(subscription=sid, offset=len(got), max_items=10_000,
                                                       wait_ms=5000), timeout=30)
        got.extend(reply.items)
        if reply.closed:
            return got
        assert reply.items, "no results in 5 s"


def test_the_whole_attack_list_is_refused_and_the_genuine_subscription_still_served(net: Net) -> None:
    alice = net.thin("SP4", net.tokens["alice"])
    alice.RegisterStream(pb.RegisterStreamRequest(name="photons", root="photons", item="photon", rate=100))
    sid = subscribe(net, "SP1", "alice", example_query("q1"))

    # -- thin peers: tokens, ownership
    refused(lambda: net.thin("SP4", None).Publish(pb.PublishRequest(stream="photons", items=[b"<photon/>"])),
            grpc.StatusCode.UNAUTHENTICATED, "no token")
    expired = issue_token(net.keys, "alice", ["photons"], subscribe=True, expires_s=1, now=time.time() - 3600)
    refused(lambda: net.thin("SP1", expired).Subscribe(pb.SubscribeRequest(query=example_query("q1"))),
            grpc.StatusCode.UNAUTHENTICATED, "expired")
    head, claims, sig = net.tokens["bob"].split(".")
    payload = json.loads(jwt.utils.base64url_decode(claims)) | {"admin": True, "publish": ["*"]}
    tampered = ".".join([head, jwt.utils.base64url_encode(json.dumps(payload).encode()).decode(), sig])
    refused(lambda: net.thin("SP1", tampered).Status(pb.StatusRequest()),
            grpc.StatusCode.UNAUTHENTICATED, "signature")
    other_keys = net.keys.parent / "other-backbone"
    init_backbone(other_keys, {"SP1": hosts_of("127.0.0.1:1")})
    refused(lambda: net.thin("SP1", issue_token(other_keys, "alice", admin=True)).Status(pb.StatusRequest()),
            grpc.StatusCode.UNAUTHENTICATED, "signature")
    bob = net.thin("SP1", net.tokens["bob"])
    refused(lambda: bob.ReadResults(pb.ReadResultsRequest(subscription=sid, max_items=10)),
            grpc.StatusCode.PERMISSION_DENIED, "another user")
    refused(lambda: bob.Unsubscribe(pb.UnsubscribeRequest(subscription=sid)), grpc.StatusCode.PERMISSION_DENIED)
    assert sid not in json.loads(bob.Status(pb.StatusRequest()).json)["subscriptions"]
    bob4 = net.thin("SP4", net.tokens["bob"])
    refused(lambda: bob4.Publish(pb.PublishRequest(stream="photons", items=[b"<photon><en>9</en></photon>"])),
            grpc.StatusCode.PERMISSION_DENIED, "may not publish")
    refused(lambda: bob4.CloseStream(pb.CloseStreamRequest(stream="photons")), grpc.StatusCode.PERMISSION_DENIED)
    squatter = net.thin("SP4", issue_token(net.keys, "mallory", ["photons"]))
    refused(lambda: squatter.RegisterStream(pb.RegisterStreamRequest(name="photons", root="photons", item="photon")),
            grpc.StatusCode.PERMISSION_DENIED, "another user")
    refused(lambda: squatter.Publish(pb.PublishRequest(stream="photons", items=[b"<photon/>"])),
            grpc.StatusCode.PERMISSION_DENIED, "another user")

    # -- super-peer calls: mutual TLS on the peer address only
    assert code_of(lambda: net.backbone("SP1", None).Heartbeat(pb.HeartbeatRequest(sender="SP5"), timeout=5)) \
        == grpc.StatusCode.UNAVAILABLE  # no client certificate: the handshake fails
    assert code_of(lambda: net.backbone("SP1", "SP1", keys=other_keys).Heartbeat(
        pb.HeartbeatRequest(sender="SP5"), timeout=5)) == grpc.StatusCode.UNAVAILABLE  # another CA
    thin_as_peer = pb_grpc.SuperPeerStub(grpc.secure_channel(net.topology.address("SP1"), grpc.composite_channel_credentials(
        grpc.ssl_channel_credentials(net.ca), grpc.access_token_call_credentials(net.tokens["admin"]))))
    refused(lambda: thin_as_peer.Remove(pb.RemoveRequest(subscription=sid)), grpc.StatusCode.PERMISSION_DENIED,
            "super-peer call")
    stream = next(s for s in net.peers["SP1"].node.state.table if s.id.startswith("SP") and s.route[-1] == "SP1")
    before = stream.route[-2]
    wrong = next(p for p in net.topology.backbone.peers if p not in stream.route)
    for as_peer, sender in ((wrong, before), (wrong, wrong)):  # a forged sender, a peer off the route
        refused(lambda: net.backbone("SP1", as_peer).Transfer(pb.TransferRequest(
            stream=stream.id, items=["<vela/>"], sender=sender, end=True), timeout=5),
            grpc.StatusCode.PERMISSION_DENIED)

    refused(lambda: net.backbone("SP1", wrong).Remove(pb.RemoveRequest(subscription=sid)),
            grpc.StatusCode.PERMISSION_DENIED, "its own")
    refused(lambda: net.backbone("SP1", wrong).Truncate(pb.TruncateRequest(stream=stream.id, peer=stream.route[0])),
            grpc.StatusCode.PERMISSION_DENIED, "not on the route")
    neighbour = next(iter(net.topology.backbone.graph["SP1"]))
    refused(lambda: net.backbone("SP1", wrong).ClaimLowering(pb.ClaimLoweringRequest(  # (another's subscription)
        neighbour=neighbour, subscription=sid, priority=1e9), timeout=5), grpc.StatusCode.PERMISSION_DENIED, "its own")
    refused(lambda: net.backbone("SP1", wrong).ClaimLowering(pb.ClaimLoweringRequest(
        neighbour="nowhere", subscription=f"{wrong}-feedbeef", priority=1.0), timeout=5),
        grpc.StatusCode.INVALID_ARGUMENT, "no link")
    transport = net.peers[wrong].node.transport  # (the claim as a super-peer makes it: refusals are answers)
    said = transport.claim_lowering("SP1", "nowhere", f"{wrong}-feedbeef", 1.0)
    assert not said.granted and "no link" in said.reason and "SP1" not in transport.unreachable
    said = transport.claim_lowering("SP1", neighbour, f"{wrong}-feedbeef", float("nan"))
    assert not said.granted and "priority" in said.reason
    assert "gathered" in transport.claim_lowering("SP1", neighbour, f"{wrong}-feedbeef", 1.0).reason

    # -- plans: loop-free routes on links, no forged originals, leases
    part = {"subscription": "SP7-feedbeef", "target": "SP7", "version": None}
    photons = net.peers["SP4"].node.state.table.get("photons")
    loop = {**_stream(photons, "SP7.999002", ["SP7", "SP5", "SP7"]), "origin": "SP7"}
    refused(lambda: net.backbone("SP5", "SP7").Reserve(pb.ReserveRequest(
        transaction="t-loop", part_json=json.dumps({**part, "streams": [loop]}))), grpc.StatusCode.INVALID_ARGUMENT,
        "visits a peer twice")
    elsewhere = {**loop, "id": "SP1.999004"}  # another peer's stream ids
    refused(lambda: net.backbone("SP5", "SP7").Reserve(pb.ReserveRequest(
        transaction="t-other", part_json=json.dumps({**part, "streams": [elsewhere]}))),
        grpc.StatusCode.PERMISSION_DENIED, "its own")
    forged = {**_stream(photons, "photons", ["SP7", "SP5"]), "origin": "SP7", "original": True, "parent": None}
    refused(lambda: net.backbone("SP5", "SP7").Reserve(pb.ReserveRequest(
        transaction="t-forged", part_json=json.dumps({**part, "streams": [forged]}))), grpc.StatusCode.PERMISSION_DENIED)
    forged["id"] = "SP7.999003"
    refused(lambda: net.backbone("SP5", "SP7").Reserve(pb.ReserveRequest(
        transaction="t-forged", part_json=json.dumps({**part, "streams": [forged]}))), grpc.StatusCode.INVALID_ARGUMENT,
        "only registering a stream")
    announce = {**_stream(photons, "bobs", ["SP4"]), "origin": "SP4", "original": True, "parent": None}
    refused(lambda: net.backbone("SP1", "SP7").AnnounceStream(pb.AnnounceStreamRequest(
        stream_json=json.dumps(announce))), grpc.StatusCode.PERMISSION_DENIED, "may announce only")

    # -- the genuine subscription is served exactly
    done = alice.Publish(pb.PublishRequest(stream="photons", items=[p.encode() for p in PHOTONS]))
    assert done.accepted == len(PHOTONS)
    alice.CloseStream(pb.CloseStreamRequest(stream="photons"))
    got = read_all(net, "SP1", "alice", sid)
    assert same(got, reference_results(example_query("q1"), PHOTONS))


def test_an_uncommitted_reservation_is_a_lease_that_expires(net: Net, monkeypatch) -> None:
    monkeypatch.setattr(transactions, "RESERVATION_TTL_S", 0.5)
    sp5 = net.peers["SP5"].node
    photons = sp5.state.known_originals["photons"]
    held = {**_stream(photons, "SP7.999100", ["SP7", "SP5"]), "origin": "SP7"}
    reply = net.backbone("SP5", "SP7").Reserve(pb.ReserveRequest(transaction="t-lease", part_json=json.dumps(
        {"subscription": "SP7-0badcafe", "target": "SP7", "version": None, "streams": [held]})))
    assert reply.ok, reply.reason
    assert sp5.state.transactions.reserved()
    until(lambda: not sp5.state.transactions.reserved(), seconds=5)


def test_hostile_items_and_queries_are_refused_with_the_reason(net: Net) -> None:
    bob = net.thin("SP4", net.tokens["bob"])
    bob.RegisterStream(pb.RegisterStreamRequest(name="bobs", root="photons", item="photon"))
    sid = subscribe(net, "SP4", "bob", '''<r>{ for $p in stream("bobs")/photons/photon return $p }</r>''')
    xxe = ('<!DOCTYPE photon [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
           "<photon><en>&x;</en></photon>")
    laughs = ("<!DOCTYPE photon [<!ENTITY a \"lol\">" + "".join(
        f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(9)) + "]><photon>&j;</photon>")
    deep = "<photon>" + "<a>" * 100_000 + "</a>" * 100_000 + "</photon>"
    big = "<photon><en>" + "1" * (50 << 20) + "</en></photon>"
    good = "<photon><en>1.5</en></photon>"
    started = time.monotonic()
    done = bob.Publish(pb.PublishRequest(stream="bobs", items=[x.encode() for x in (xxe, laughs, deep, big, good)]),
                       timeout=120)
    assert (done.accepted, done.rejected) == (1, 4), done
    reasons = " | ".join(done.rejections)
    assert "item 0" in reasons and "item 3" in reasons and "bytes" in reasons, reasons
    assert time.monotonic() - started < 60
    bob.CloseStream(pb.CloseStreamRequest(stream="bobs"))
    got = read_all(net, "SP4", "bob", sid)
    assert got == [good], got[:3]  # nothing of the hostile items travelled
    huge = "<r>{ for $p in stream(\"bobs\")/photons/photon return $p }</r>" + " " * (1 << 20)
    refused(lambda: bob.Subscribe(pb.SubscribeRequest(query=huge)), grpc.StatusCode.INVALID_ARGUMENT, "query")
    nested = "<r>{ " + "(" * 100_000 + "1" + ")" * 100_000 + " }</r>"
    refused(lambda: bob.Subscribe(pb.SubscribeRequest(query=nested)), grpc.StatusCode.INVALID_ARGUMENT, "query:1:")


def test_per_user_limits_on_subscriptions_and_publish_rate(tmp_path) -> None:
    with running_network(tmp_path, keys=tmp_path / "keys", quotas=UserQuotas(2, 100.0)) as (topology, peers):
        net = Net(topology, peers, tmp_path / "keys")
        alice = net.thin("SP4", net.tokens["alice"])
        alice.RegisterStream(pb.RegisterStreamRequest(name="photons", root="photons", item="photon"))
        for _ in range(2):
            subscribe(net, "SP1", "alice", example_query("q1"))
        refused(lambda: subscribe(net, "SP1", "alice", example_query("q2")),
                grpc.StatusCode.RESOURCE_EXHAUSTED, "the most allowed")
        subscribe(net, "SP1", "bob", example_query("q2"))  # another user's own quota
        batch = [p.encode() for p in PHOTONS[:150]]  # within the burst (2 s at 100/s)
        assert alice.Publish(pb.PublishRequest(stream="photons", items=batch)).accepted == 150
        refused(lambda: alice.Publish(pb.PublishRequest(stream="photons", items=batch)),
                grpc.StatusCode.RESOURCE_EXHAUSTED, "100 items/s")


def _stream(base, sid: str, route: list[str]) -> dict:
    from sharing.serialization import stream_to_json

    j = stream_to_json(base)
    j.update(id=sid, route=route, parent=base.id, original=False, users=[])
    return j


def test_a_refused_count_alignment_is_an_error_at_once_not_silence(net: Net) -> None:
    """A super-peer that did not plan a count window may not align it (``check_align``): the
    refusal reaches the caller as such — its move is cancelled at once instead of asking again,
    as it would a peer that did not answer, until the switch's deadline."""
    link = net.peers["SP1"].node.transport
    with pytest.raises(NodeError) as err:
        link.align_count("SP4", "SP7.3", Anchor(0, 0))
    assert err.value.code == "PERMISSION_DENIED", err.value
    assert link.align_count("SP4", "SP1.999", Anchor(0, 0)) is not None  # (its own: answered)
