"""The webhook sink against a real HTTP(S) server: certificates verified, a refusal stops it with
the receiver's reason, an overloaded receiver is retried, and a pending batch is sent again under
the same key after the sink is made again from its state."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from thinpeer.ops.certs import init_backbone, peer_files
from thinpeer.sinks.base import SinkError
from thinpeer.sinks.webhook import WebhookSink


@contextmanager
def receiver(answers: list[int], tls: Path | None = None) -> Iterator[tuple[str, list[dict]]]:
    """A real server answering each POST with the next status of ``answers`` (then 200)."""
    posts: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            posts.append({"key": self.headers["Idempotency-Key"], "body": body,
                          "type": self.headers["Content-Type"]})
            self.send_response(answers.pop(0) if answers else 200)
            self.send_header("Location", "/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    scheme = "http"
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        cert, key = peer_files(tls, "hook")
        context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{scheme}://localhost:{server.server_address[1]}/hook", posts
    finally:
        server.shutdown()
        server.server_close()


def test_an_untrusted_certificate_is_refused_and_a_given_ca_is_trusted(tmp_path):
    keys = init_backbone(tmp_path / "keys", {"hook": ["localhost", "127.0.0.1"]})
    with receiver([], tls=keys) as (url, posts):
        sink = WebhookSink(url, "SP1-ab", tmp_path / "state.json", "lines")
        sink.write(0, ["<a>1</a>"], "r")
        with pytest.raises(SinkError, match="certificate is not trusted"):
            sink.flush()
        assert posts == []
        sink = WebhookSink(url, "SP1-ab", tmp_path / "state.json", "lines", ca=str(keys / "ca.pem"))
        assert sink.pending() == (0, 1)  # the refused attempt is still pending
        sink.write(0, ["<a>1</a>"], "r")
        assert sink.flush() == 1
        assert posts == [{"key": "SP1-ab-0-1", "body": "<a>1</a>\n", "type": "text/plain; charset=utf-8"}]


def test_a_refusal_stops_the_sink_and_an_overloaded_receiver_is_retried(tmp_path):
    said: list[str] = []
    with receiver([503, 429, 200, 400]) as (url, posts):
        sink = WebhookSink(url, "SP1-ab", tmp_path / "state.json", "ndjson", batch_items=2, say=said.append)
        sink.write(0, ["<e><n>1</n></e>", "<e><n>2</n></e>"], "r")
        assert sink.flush() == 2
        assert [p["key"] for p in posts] == ["SP1-ab-0-2"] * 3  # the same batch, the same key
        assert posts[0]["body"] == '{"n":1}\n{"n":2}\n'
        assert any("503" in s for s in said) and any("429" in s for s in said)
        sink.write(2, ["<e><n>3</n></e>"], "r")
        with pytest.raises(SinkError, match="refused results 2..2: HTTP 400"):
            sink.flush()
    assert WebhookSink(url, "SP1-ab", tmp_path / "state.json").committed() == 2


def test_bad_urls_are_refused():
    for url in ("ftp://x/y", "http://", "localhost:80"):
        with pytest.raises(SinkError, match="not an http"):
            WebhookSink(url, "SP1-ab", Path("/nonexistent/state.json"))


def test_a_redirect_is_not_a_delivery(tmp_path):
    """urllib would follow a 301 to a POST with a GET without the body, and count it taken."""
    with receiver([301]) as (url, posts):
        sink = WebhookSink(url, "SP1-ab", tmp_path / "state.json", "lines")
        sink.write(0, ["<a>1</a>"], "r")
        with pytest.raises(SinkError, match="HTTP 301.*to /elsewhere"):
            sink.flush()
        assert sink.committed() is None and len(posts) == 1


def test_a_pending_batch_goes_again_whole_in_its_format_whatever_the_settings_now(tmp_path):
    with receiver([]) as (url, posts):
        sink = WebhookSink(url, "SP1-ab", tmp_path / "state.json", "lines", batch_items=4,
                           say=lambda message: None)
        sink.write(0, [f"<a>{k}</a>" for k in range(4)], "r")
        sink._post = lambda *a: (_ for _ in ()).throw(KeyboardInterrupt)  # killed mid-POST
        with pytest.raises(KeyboardInterrupt):
            sink.flush()
        again = WebhookSink(url, "SP1-ab", tmp_path / "state.json", "ndjson", batch_items=2)
        assert again.pending() == (0, 4)
        again.write(0, [f"<a>{k}</a>" for k in range(4)], "r")
        assert again.flush() == 4
        assert [p["key"] for p in posts] == ["SP1-ab-0-4"]
        assert posts[0]["type"].startswith("text/plain")
