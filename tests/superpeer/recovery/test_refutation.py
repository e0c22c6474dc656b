"""A super-peer declared down while it runs refutes the declaration (SWIM's incarnation): real
nodes as the daemon builds them, on the in-process transport, each heartbeat handed over as the
wire would carry it."""

from __future__ import annotations

import dataclasses
import time

from superpeer_fakes import in_process_network

from superpeer.recovery.membership import Gossip, Membership, Record, records_to_json


def test_a_running_peer_refutes_its_declaration_and_its_neighbour_withdraws_its_own() -> None:
    net = in_process_network()
    try:
        x, y = net.peers["SP1"], net.peers["SP5"]  # (neighbours on the paper's backbone)
        assert "SP5" in x.transport.detector.neighbours
        epoch = x.transport.epoch
        # Y's record as it would be after X's answers stopped reaching it (an overloaded X)
        declaring = Record("SP5", y.transport.epoch, 1.0, 7, time.time(), down={"SP1": (epoch, 0)})
        x.heartbeats.reply(Gossip("SP5", records=records_to_json([declaring])))
        refuted = x.heartbeats.membership.own()
        assert refuted.alive == 1
        x.heartbeats.reply(Gossip("SP5", records=records_to_json([declaring])))  # (news once only)
        assert x.heartbeats.membership.own().alive == 1
        # Y had declared X down; X's refutation reaches it: that declaration no longer counts
        y.transport.detector.heard("SP1", 0.0, incarnation=epoch)
        for t in range(1, 4):
            y.transport.detector.missed("SP1", float(t), "DEADLINE_EXCEEDED")
        y.heartbeats.changed()
        assert y.heartbeats.membership.own().down == {"SP1": (epoch, 0)}
        y.heartbeats.reply(Gossip("SP1", records=records_to_json([refuted])))
        later = dataclasses.replace(refuted, version=refuted.version + 1, usage={"version": 9})
        y.heartbeats.reply(Gossip("SP1", records=records_to_json([later])))  # (no new refutation)
        refuted = later
        far = Membership("F", "eF", 0.0)
        far.merge([refuted, y.heartbeats.membership.own()])
        assert far.verdict("SP1").up is True
        # …until Y's next indirect probe: nobody reaches X (it may have crashed since): declared
        # again at its new count, which counts
        y.heartbeats.once()
        assert y.heartbeats.membership.own().down == {"SP1": (epoch, 1)}
        assert y.heartbeats.status()["declared"] == {"SP1": {"epoch": epoch, "alive": 1, "refuted": 1}}
        assert x.heartbeats.status()["alive"] == 1
        far.merge([y.heartbeats.membership.own()])
        assert far.verdict("SP1").up is False
    finally:
        for node in net.peers.values():
            node.stop()


def test_a_neighbour_declared_down_that_restarts_is_judged_afresh() -> None:
    net = in_process_network()
    try:
        y = net.peers["SP5"]
        detector = y.transport.detector
        detector.heard("SP1", 0.0, incarnation="old process")
        for t in range(1, 4):
            detector.missed("SP1", float(t), "UNAVAILABLE")
        y.heartbeats.changed()
        assert y.heartbeats.membership.own().down == {"SP1": ("old process", 0)}
        # the new process's record comes (its own heartbeat to SP5, before SP5 asked it)
        y.heartbeats.reply(Gossip("SP1", records=records_to_json([Record("SP1", "new process", 9.0, 0, 9.0)])))
        y.heartbeats.changed()
        assert detector.peer_state("SP1") == "unknown" and y.heartbeats.membership.own().down == {}
    finally:
        for node in net.peers.values():
            node.stop()
