"""``superpeer serve``'s settings: flag > environment > file > default, unknown keys and bad
values refused with where they are, ``--print-config`` read back as the same settings, and a real
daemon started from a file alone."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import urllib.request
from pathlib import Path

import pytest

from superpeer.command import add_serve_arguments
from superpeer.config import ConfigError, configure, print_config
from thinpeer.ops.ports import with_free_ports
from thinpeer.ops.topologies import shipped_topology

ROOT = Path(__file__).resolve().parents[2]


def parser():
    import argparse

    p = argparse.ArgumentParser(prog="serve")
    add_serve_arguments(p)
    return p


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_flag_beats_the_environment_which_beats_the_file_which_beats_the_default(tmp_path):
    config = write(tmp_path / "sp.toml", 'topology = "paper-example"\nid = "SP4"\nmetrics-port = 1\n'
                                         'heartbeat_s = "500ms"\nretention = 7\ncut_link = ["SP3"]\nwidening = true\n')
    env = {"STREAMGLOBE_METRICS_PORT": "2", "STREAMGLOBE_RETENTION": "8", "STREAMGLOBE_TOKEN": "not a setting"}
    args, source = configure(parser(), ["--config", str(config), "--retention", "9"], env)
    assert (args.topology, args.id, args.heartbeat_s, args.cut_link, args.widening) == \
        ("paper-example", "SP4", 0.5, ["SP3"], True)
    assert (args.metrics_port, args.retention, args.heartbeat_misses) == (2, 9, 3)
    assert source["metrics_port"] == "environment STREAMGLOBE_METRICS_PORT"
    assert source["retention"] == "command line" and source["heartbeat_s"] == f"file {config}"
    assert source["heartbeat_misses"] == "default"
    # a thin peer's STREAMGLOBE_STATE_DIR (its saved offsets) is not the super-peer's state
    args, _ = configure(parser(), ["--config", str(config)], {"STREAMGLOBE_STATE_DIR": "/elsewhere"})
    assert args.state_dir is None
    args, _ = configure(parser(), ["--config", str(config)], {"STREAMGLOBE_SUPERPEER_STATE_DIR": str(tmp_path)})
    assert args.state_dir == tmp_path


@pytest.mark.parametrize(("text", "env", "said"), [
    ('topology = "t"\nid = "SP4"\nmetrics_prot = 1\n', {}, "unknown setting 'metrics_prot' (did you mean 'metrics_port'?)"),
    ('topology = "t"\nid = "SP4"\nexecutor = "flink"\n', {}, "'flink' is not one of inline, spark"),
    ('topology = "t"\nid = "SP4"\n', {"STREAMGLOBE_HEARTBEAT_S": "soon"}, "STREAMGLOBE_HEARTBEAT_S: 'soon'"),
    ('topology = "t"\nid = "SP4"\nwidening = "maybe"\n', {}, "'maybe' is not true or false"),
    ('topology = "t"\nid = "SP4"\nretention = [1]\n', {}, "expected one value"),
    ('topology = "t"\nid = \n', {}, "not TOML"),
])
def test_a_setting_that_is_not_one_or_a_value_its_flag_refuses_is_an_error(tmp_path, text, env, said):
    config = write(tmp_path / "bad.toml", text)
    with pytest.raises(ConfigError, match=None) as caught:
        configure(parser(), ["--config", str(config)], env)
    assert said in str(caught.value)


def test_print_config_read_back_gives_the_same_settings(tmp_path):
    p = parser()
    args, source = configure(p, ["--topology", "grid-4x4", "--id", "SP0", "--executor", "spark",
                                 "--max-item-bytes", "1MiB", "--trigger-ms", "250", "--cut-link", "SP1"], {})
    text = print_config(args, p, source)
    tomllib.loads(text)  # (valid TOML)
    again, again_source = configure(parser(), ["--config", str(write(tmp_path / "back.toml", text))], {})
    assert vars(again) | {"config": None} == vars(args) | {"config": None}
    assert again_source["executor"].startswith("file ")


def test_a_daemon_runs_on_its_file_alone(tmp_path):
    topology = with_free_ports(shipped_topology("paper-example"), tmp_path / "t.toml")
    config = write(tmp_path / "sp4.toml", f'topology = "{topology}"\nid = "SP4"\ninsecure = true\nin_memory = true\n'
                                          'metrics_port = 0\nlog_format = "json"\n')
    daemon = subprocess.Popen([sys.executable, "-m", "thinpeer.cli", "superpeer", "serve", "--config", str(config)],
                              stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        for line in daemon.stderr:  # (JSON log lines first, then the line saying where it serves)
            if "serving thin peers" in line and not line.startswith("{"):
                break
        else:
            raise AssertionError("the daemon ended without serving")
        metrics = line.split("metrics on http://", 1)[1].split("/metrics", 1)[0]
        with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as reply:
            assert b"streamglobe_registration_seconds_count 0.0" in reply.read()
    finally:
        daemon.terminate()
        daemon.wait(30)


PER_PEER = '''
[[superpeer]]
id = "A"
address = "127.0.0.1:1"
[superpeer.settings]
retention = 11
heartbeat_s = "250ms"
reoptimise_every = "7s"

[[superpeer]]
id = "B"
address = "127.0.0.1:2"
settings = { retention = 12 }

[[link]]
a = "A"
b = "B"
bandwidth = "100Mbit"
'''


def test_a_superpeers_own_settings_in_the_topology_beat_the_file_and_lose_to_the_environment(tmp_path):
    from superpeer.command import _topology_settings

    topology = write(tmp_path / "t.toml", PER_PEER)
    config = write(tmp_path / "all.toml", "retention = 5\nheartbeat_s = 2\nheartbeat_misses = 4\n")
    found = _topology_settings(None)
    args, source = configure(parser(), ["--topology", str(topology), "--id", "A", "--config", str(config)],
                             {"STREAMGLOBE_HEARTBEAT_S": "1"}, found)
    assert (args.retention, args.heartbeat_s, args.heartbeat_misses, args.reoptimise_every) == (11, 1.0, 4, 7.0)
    assert source["retention"] == f"topology {topology} [[superpeer]] A settings"
    assert source["heartbeat_s"] == "environment STREAMGLOBE_HEARTBEAT_S"
    assert source["heartbeat_misses"] == f"file {config}"
    args, _ = configure(parser(), ["--config", str(config), "--topology", str(topology), "--id", "B",
                                   "--retention", "13"], {}, found)
    assert args.retention == 13  # (the command line beats all)
    args, _ = configure(parser(), ["--config", str(config), "--topology", str(topology), "--id", "B"], {}, found)
    assert (args.retention, args.heartbeat_s) == (12, 2.0)


@pytest.mark.parametrize(("settings", "said"), [
    ("retension = 3", "unknown setting 'retension' (did you mean 'retention'?)"),
    ('id = "B"', "'id' cannot be a super-peer's own setting"),
    ('executor = "flink"', "'flink' is not one of inline, spark"),
])
def test_a_wrong_setting_in_the_topology_is_an_error_naming_it(tmp_path, settings, said):
    from superpeer.command import _topology_settings

    topology = write(tmp_path / "t.toml", PER_PEER.replace("retention = 11", settings))
    with pytest.raises(ConfigError) as caught:
        configure(parser(), ["--topology", str(topology), "--id", "A"], {}, _topology_settings(None))
    assert said in str(caught.value) and str(topology) in str(caught.value)


def test_network_up_gives_each_daemon_its_own_settings_from_the_topology(tmp_path):
    from thinpeer.client import SuperPeerClient
    from thinpeer.ops.containers.compose import toml_tables
    from thinpeer.ops.processes import up

    source = write(tmp_path / "source.toml", PER_PEER)
    topology = with_free_ports(source, tmp_path / "t.toml")
    network = up(topology, state_dir=tmp_path / "state")
    try:
        a, b = (SuperPeerClient(network.addresses[p]).status() for p in ("A", "B"))
        assert a["reoptimisation"]["every_s"] == 7.0 and b["reoptimisation"]["every_s"] != 7.0
    finally:
        network.stop()
    # the containers' topology file keeps them (an inline table)
    again = tomllib.loads(toml_tables(tomllib.loads(PER_PEER)))
    assert again["superpeer"][0]["settings"]["heartbeat_s"] == "250ms"
