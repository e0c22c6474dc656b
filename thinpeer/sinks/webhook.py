"""``subscribe --to-webhook URL``: results POSTed in batches, each batch until it is taken.

A batch is recorded as *pending* (its first offset and count) before it is sent, and committed
when the receiver answers 2xx. Every POST of the same batch carries the same
``Idempotency-Key`` (``SID-FIRST-COUNT``), and a restarted sink sends a pending batch again whole,
so a receiver that keeps the keys it has taken drops every redelivery; ``X-StreamGlobe-First-Offset``
and ``X-StreamGlobe-Count`` say which results a body holds.

Connection failures, timeouts, 408, 429 and 5xx answers are retried with exponential back-off for
as long as it takes (Ctrl-C stops); any other answer is the receiver refusing the batch, and the
sink stops with its status and reason. HTTPS certificates are verified (``ca``: a CA file to trust
besides the system's).
"""

from __future__ import annotations

import http.client
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from thinpeer.formats.results import MEDIA_TYPES, render_batch
from thinpeer.sinks.base import Held, SinkError, StateFile


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer, not a delivery: urllib would follow a 301/302/303 to a POST with
    a GET without the body, and its 2xx would count as taken."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


DEFAULT_BATCH = 500
DEFAULT_LINGER_S = 1.0
RETRIED = frozenset({408, 425, 429, 500, 502, 503, 504})
FIRST_BACKOFF_S = 0.2
MAX_BACKOFF_S = 30.0


class WebhookSink:
    def __init__(self, url: str, subscription: str, state_path: Path, fmt: str = "ndjson",
                 batch_items: int = DEFAULT_BATCH, linger_s: float = DEFAULT_LINGER_S,
                 timeout_s: float = 10.0, ca: str | None = None,
                 say: Callable[[str], None] = lambda message: None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise SinkError(f"{url!r} is not an http:// or https:// URL")
        if batch_items < 1:
            raise SinkError(f"a webhook batch holds at least one result, not {batch_items}")
        self.url = url
        self.subscription = subscription
        self.fmt = fmt
        self.batch_items = batch_items
        self.linger_s = linger_s
        self.timeout_s = timeout_s
        self.say = say
        self.description = f"webhook {url}"
        self.state = StateFile(state_path)
        context = ssl.create_default_context(cafile=ca) if parts.scheme == "https" else None
        self._opener = urllib.request.build_opener(_NoRedirects(), urllib.request.HTTPSHandler(context=context))
        record = self.state.load()
        self._committed: int | None = record.get("committed")
        self._pending: tuple[int, int] | None = tuple(record["pending"]) if record.get("pending") else None  # type: ignore[assignment]
        # a pending batch goes again as it went: one POST, in the format it had
        self._pending_format: str = record.get("format") or fmt
        self._held = Held()

    def committed(self) -> int | None:
        return self._committed

    def pending(self) -> tuple[int, int] | None:
        return self._pending

    def write(self, offset: int, items: list[str], root: str) -> None:
        if not self._held.continues(offset):
            self.flush()
        self._held.add(offset, items, root)

    def due(self) -> bool:
        return self._held.full(self.batch_items, self.linger_s)

    def flush(self) -> int | None:
        while self._held.items:
            first = self._held.first
            again = self._pending is not None and self._pending[0] == first
            count = self._pending[1] if again else self.batch_items  # type: ignore[index]
            fmt = self._pending_format if again else self.fmt
            part = self._held.items[:count]
            self._pending, self._pending_format = (first, len(part)), fmt
            self.state.save({"committed": self._committed, "pending": list(self._pending), "format": fmt})
            self._post(first, part, fmt)
            self._committed, self._pending = self._held.delivered(len(part)), None
            self.state.save({"committed": self._committed, "pending": None})
        return self._committed

    def _post(self, first: int, items: list[str], fmt: str) -> None:
        body = render_batch(items, self._held.root, fmt).encode("utf-8")
        headers = {"Content-Type": MEDIA_TYPES[fmt],
                   "Idempotency-Key": f"{self.subscription}-{first}-{len(items)}",
                   "X-StreamGlobe-Subscription": self.subscription,
                   "X-StreamGlobe-First-Offset": str(first),
                   "X-StreamGlobe-Count": str(len(items)),
                   "User-Agent": "streamglobe-webhook"}
        delay = FIRST_BACKOFF_S
        attempt = 0
        while True:
            attempt += 1
            request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            try:
                with self._opener.open(request, timeout=self.timeout_s) as answer:
                    answer.read()
                if attempt > 1:
                    self.say(f"webhook {self.url}: results {first}..{first + len(items) - 1} "
                             f"taken after {attempt} attempts")
                return
            except urllib.error.HTTPError as exc:
                if exc.code not in RETRIED:
                    moved = f" (to {exc.headers.get('Location')}: give that URL)" if 300 <= exc.code < 400 else ""
                    raise SinkError(f"webhook {self.url} refused results {first}.."
                                    f"{first + len(items) - 1}: HTTP {exc.code} {exc.reason}{moved}") from None
                why = f"HTTP {exc.code} {exc.reason}"
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, ssl.SSLCertVerificationError):
                    raise SinkError(f"webhook {self.url}: its certificate is not trusted "
                                    f"({exc.reason.verify_message}); give --webhook-ca FILE") from None
                why = str(exc.reason)
            except (OSError, http.client.HTTPException) as exc:  # cut off, timed out, garbled
                why = f"{type(exc).__name__}: {exc}"
            self.say(f"webhook {self.url}: {why}; trying again in {delay:.1f} s")
            time.sleep(delay)
            delay = min(delay * 2, MAX_BACKOFF_S)

    def close(self) -> None:
        pass
