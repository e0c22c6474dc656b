"""Topology files are read strictly (issue 30): a misspelt key, a wrong type, a bandwidth not
above zero, a link to an unknown super-peer… are errors naming the file, the line and the keys
known there; bandwidths take the units of every flag (a bare number is bit/s)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sharing.backbone import TopologyError
from superpeer.topology import load_topology
from thinpeer.ops.topologies import shipped_topologies, shipped_topology

GOOD = '''# two super-peers
[[superpeer]]
id = "A"
address = "127.0.0.1:50100"
load_capacity = 2.0

[[superpeer]]
id = "B"
address = "127.0.0.1:50101"
pindex = 1.5

[[link]]
a = "A"
b = "B"
bandwidth = 100e6  # bit/s
'''


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "t.toml"
    path.write_text(text)
    return path


def refused(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(TopologyError) as error:
        load_topology(path)
    return str(error.value).replace(str(path), "t.toml")


@pytest.mark.parametrize("name", shipped_topologies())
def test_the_shipped_topologies_load(name: str) -> None:
    assert load_topology(str(shipped_topology(name))).backbone.links


def test_the_shipped_grid_in_subnets_has_two_halves_joined_by_their_border() -> None:
    subnets = load_topology(str(shipped_topology("grid-4x4-subnets"))).subnets
    assert subnets is not None and sorted(subnets.by_id) == ["east", "west"]
    assert subnets.by_id["west"].gateways == {"SP1", "SP5", "SP9", "SP13"}
    assert subnets.summary()["links_between_subnets"] == 4


def test_a_good_file_loads_with_its_values(tmp_path: Path) -> None:
    topology = load_topology(write(tmp_path, GOOD))
    assert topology.backbone.peers["A"].load_capacity == 2.0 and topology.backbone.peers["B"].pindex == 1.5
    assert topology.backbone.links[frozenset("AB")].bandwidth == 100e6


@pytest.mark.parametrize("written, bits", [("100e6", 100e6), ("1000", 1000), ('"100Mbit"', 100e6),
                                           ('"10 Mbps"', 10e6), ('"10MB/s"', 80e6)])
def test_bandwidths_take_the_units_of_every_flag(tmp_path: Path, written: str, bits: float) -> None:
    topology = load_topology(write(tmp_path, GOOD.replace("100e6", written)))
    assert topology.backbone.links[frozenset("AB")].bandwidth == bits


def test_a_misspelt_key_is_an_error_with_its_line_and_the_known_keys(tmp_path: Path) -> None:
    says = refused(tmp_path, GOOD.replace("load_capacity = 2.0", "load_capcity = 8.0"))
    assert says == ("t.toml:5: [[superpeer]] A: unknown key 'load_capcity' (did you mean 'load_capacity'?) "
                    "(known keys: id, address, peer_address, load_capacity, pindex, position, settings)")


def test_a_wrong_type_is_an_error_with_its_line(tmp_path: Path) -> None:
    says = refused(tmp_path, GOOD.replace("pindex = 1.5", 'pindex = "fast"'))
    assert says == "t.toml:10: [[superpeer]] B: pindex must be a number, not 'fast'"


@pytest.mark.parametrize("bandwidth, says", [
    ("-5", "bandwidth must be above zero, not -5"), ("0", "bandwidth must be above zero, not 0"),
    ('"10MB"', "that is a size in bytes, not a rate"), ("true", "not True")])
def test_a_bandwidth_that_is_not_a_positive_bit_rate_is_an_error_with_its_line(tmp_path, bandwidth, says) -> None:
    message = refused(tmp_path, GOOD.replace("100e6", bandwidth))
    assert message.startswith("t.toml:15: [[link]] A–B: bandwidth") and says in message, message


def test_a_link_to_an_unknown_superpeer_is_an_error_with_its_line(tmp_path: Path) -> None:
    says = refused(tmp_path, GOOD.replace('b = "B"', 'b = "C"'))
    assert says == "t.toml:14: [[link]] A–C: b names no super-peer of the topology: 'C' (there are A, B)"


@pytest.mark.parametrize("change, says", [
    (('id = "B"', 'id = "A"'), "t.toml:8: [[superpeer]] A: the id 'A' is defined twice"),
    (("load_capacity = 2.0", "load_capacity = 0"), "t.toml:5: [[superpeer]] A: load_capacity must be above zero, not 0"),
    (('"127.0.0.1:50101"', '"localhost"'), "t.toml:9: [[superpeer]] B: address must be \"host:port\""),
    (('id = "A"\n', ""), "t.toml:2: [[superpeer]] 1: missing key 'id'"),
    (("# two super-peers", 'name = "x"'), "t.toml:1: unknown key 'name' (known keys: superpeer, link, subnet)"),
    (('b = "B"', 'b = "A"'), "t.toml:14: [[link]] A–A connects a super-peer to itself"),
    (("bandwidth = 100e6  # bit/s", 'bandwidth = 1e6\nbandwith = 2e6'),
     "t.toml:16: [[link]] A–B: unknown key 'bandwith' (did you mean 'bandwidth'?)"),
])
def test_other_faults_name_their_line(tmp_path: Path, change: tuple[str, str], says: str) -> None:
    assert refused(tmp_path, GOOD.replace(*change)).startswith(says)


def test_a_link_given_twice_is_an_error(tmp_path: Path) -> None:
    says = refused(tmp_path, GOOD + '\n[[link]]\na = "B"\nb = "A"\nbandwidth = 1e6\n')
    assert says == "t.toml:17: [[link]] B–A is defined twice (also link 1)"


@pytest.mark.parametrize("command", [["superpeer", "serve", "--id", "A", "--insecure", "--in-memory"],
                                     ["network", "up", "--insecure"], ["deploy", "up", "--insecure"],
                                     ["certs", "init", "--out", "keys"]])
def test_every_command_reading_a_topology_says_the_fault_and_its_line(tmp_path, capsys, monkeypatch, command) -> None:
    from thinpeer.cli import main

    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, GOOD.replace("load_capacity = 2.0", "load_capcity = 8.0"))
    state = ["--state-dir", str(tmp_path / "state")] if command[0] in ("network", "deploy") else []
    assert main([*command, *state, "--topology", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"error: {path}:5: [[superpeer]] A: unknown key 'load_capcity'" in err, err
