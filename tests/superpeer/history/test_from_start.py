"""Subscriptions over the past (issue 15, first part): ``subscribe --from-start`` evaluates a
query over every item its stream's super-peer has logged and goes on live — the results equal
the reference evaluator's over the whole stream, windows straddling the seam included — while a
subscription registered at the same moment without it sees only what follows, undisturbed."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT
from network_harness import reference_results, running_network, same
from photons.generator import generate
from sharing.scenarios import example_query
from thinpeer.client import SuperPeerClient

PHOTONS = [p.to_xml() for p in generate(1500, seed=21)]


def test_from_start_then_live_with_no_gap_and_no_duplicate_at_the_seam(tmp_path) -> None:
    with running_network(tmp_path) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon", rate=500)
        publisher.publish("photons", PHOTONS[:700])
        past = {name: (SuperPeerClient(topology.address(peer)),
                       SuperPeerClient(topology.address(peer)).subscribe(example_query(name), from_start=True).subscription)
                for name, peer in (("q1", "SP1"), ("q3", "SP7"), ("q4", "SP0"))}
        now = SuperPeerClient(topology.address("SP1"))
        live = now.subscribe(example_query("q1")).subscription
        publisher.publish("photons", PHOTONS[700:])
        publisher.close_stream("photons")
        for name, (client, sid) in past.items():
            got = [item for _, item, _ in client.results(sid, idle_timeout=30)]
            expected = reference_results(example_query(name), PHOTONS)
            assert expected and same(got, expected), (name, len(got), len(expected))
        got = [item for _, item, _ in now.results(live, idle_timeout=30)]
        assert same(got, reference_results(example_query("q1"), PHOTONS[700:]))


def test_the_cli_takes_from_start() -> None:
    r = subprocess.run([sys.executable, "-m", "thinpeer.cli", "subscribe", "--help"], capture_output=True,
                       text=True, cwd=ROOT, timeout=60)
    assert "--from-start" in r.stdout


def test_a_stream_filled_from_the_past_is_shared_once_its_replay_has_passed(tmp_path) -> None:
    """The copy a ``--from-start`` subscription's replay fills is reused by a later live
    subscription once every replayed item has passed where it would reuse it: the live one
    gets only what follows its registration, the first one everything, and the stream is
    shipped once."""
    with running_network(tmp_path) as (topology, _):
        publisher = SuperPeerClient(topology.address("SP4"))
        publisher.register_stream("photons", "photons", "photon", rate=500)
        publisher.publish("photons", PHOTONS[:700])
        client = SuperPeerClient(topology.address("SP1"))
        past = client.subscribe(example_query("q1"), from_start=True).subscription
        expected_first = reference_results(example_query("q1"), PHOTONS[:700])
        got_first = []
        for _, item, _ in client.results(past, idle_timeout=30):  # the replay has passed SP1
            got_first.append(item)
            if len(got_first) == len(expected_first):
                break
        plan = client.status()["subscriptions"][past]["plan"]
        filled = {s for part in plan["parts"] for s in part["new_streams"]}
        live = client.subscribe(example_query("q1"))
        [part] = client.status()["subscriptions"][live.subscription]["plan"]["parts"]
        assert part["reused_stream"] in filled and not part["new_streams"], live.description
        publisher.publish("photons", PHOTONS[700:])
        publisher.close_stream("photons")
        got_first += [item for _, item, _ in client.results(past, offset=len(got_first), idle_timeout=30)]
        assert same(got_first, reference_results(example_query("q1"), PHOTONS))
        got = [item for _, item, _ in client.results(live.subscription, idle_timeout=30)]
        assert same(got, reference_results(example_query("q1"), PHOTONS[700:]))
