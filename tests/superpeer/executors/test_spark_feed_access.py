"""The Spark feed, reachable from other hosts: it serves only readers that know its secret, a
silent or wrong client holds up no one, and it advertises an address others can reach."""

from __future__ import annotations

import socket
from multiprocessing.connection import Client
from multiprocessing import AuthenticationError

import pytest

from network_harness import until

from superpeer.executors.spark.feed import FeedLog, FeedServer, reachable_host




@pytest.fixture
def server(tmp_path):
    log = FeedLog(tmp_path / "feed")
    log.append("photons", ["<photon><en>1.5</en></photon>"], end=False)
    feed = FeedServer(log, listen="0.0.0.0")
    feed.start()
    yield feed
    feed.stop()
    log.close()


def test_a_reader_with_the_secret_is_served_on_the_advertised_address(server) -> None:
    host, port = server.address
    assert host == reachable_host("0.0.0.0") and host != "0.0.0.0"
    with Client((host, port), authkey=server.authkey) as conn:
        conn.send(("read", 0, 0, 1))
        status, got = conn.recv()
        assert status == "ok" and got.joined == b"<photon><en>1.5</en></photon>" and not got.ended


def test_a_wrong_secret_is_refused_and_a_silent_client_blocks_no_one(server, monkeypatch) -> None:
    from superpeer.executors.spark import feed

    monkeypatch.setattr(feed, "HANDSHAKE_TIMEOUT_S", 1.0)
    host, port = server.address
    silent = socket.create_connection((host, port))  # connects, never answers the challenge
    try:
        with pytest.raises((AuthenticationError, EOFError, ConnectionError)):
            with Client((host, port), authkey=b"not the secret") as conn:
                conn.send(("latest",))
                conn.recv()
        until(lambda: server.rejected == 1, seconds=10, pause=0.02)
        with Client((host, port), authkey=server.authkey) as conn:  # served despite the silent one
            conn.send(("base",))
            assert conn.recv() == ("ok", 0)
        until(lambda: server.rejected == 2, seconds=10, pause=0.02)  # the silent one gave up its thread after the timeout
    finally:
        silent.close()


def test_a_loopback_feed_is_not_reachable_from_other_addresses(tmp_path) -> None:
    log = FeedLog(tmp_path / "feed")
    feed = FeedServer(log)
    try:
        assert feed.start()[0] == "127.0.0.1"
        other = reachable_host("0.0.0.0")
        if other.startswith("127."):
            pytest.skip("this host has no address besides loopback")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection((other, feed.address[1]), timeout=2).close()
    finally:
        feed.stop()
        log.close()
