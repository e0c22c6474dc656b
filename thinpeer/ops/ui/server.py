"""``streamglobe ui``: the web view's HTTP server (Starlette on uvicorn).

Pages: ``/`` (the network) and ``/subscription/{id}``. The same data as JSON: ``/api/network``
(the current snapshot, ``thinpeer.ops.ui.snapshot``), ``/api/history`` (the time series),
``/api/subscriptions/{id}`` (one subscription in full) and ``/api/events``, server-sent events
carrying each new snapshot, which is how the pages update without reloading.

Every asset is served from installed packages — our page, script and style from this
package, Plotly's bundle from the ``plotly`` wheel — so the view works on hosts without internet.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import anyio
import plotly
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from thinpeer.ops.ui.collector import Collector

STATIC = Path(__file__).resolve().parent / "static"
PLOTLY_JS = Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"
KEEPALIVE_S = 15.0


def finite(value):
    """JSON for a browser: NaN and infinities (which ``JSON.parse`` refuses) become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(value) -> str:
    return json.dumps(finite(value), separators=(",", ":"), default=str)


def json_response(value, status: int = 200) -> Response:
    return Response(dumps(value), status_code=status, media_type="application/json",
                    headers={"Cache-Control": "no-store"})


def make_app(collector: Collector) -> Starlette:
    async def network(request: Request) -> Response:
        return json_response(collector.snapshot()[1])

    async def history(request: Request) -> Response:
        return json_response(collector.history())

    async def subscription(request: Request) -> Response:
        sid = request.path_params["sid"]
        found = await anyio.to_thread.run_sync(collector.subscription, sid)
        if found is None:
            return json_response({"error": f"no subscription {sid} in the network (unsubscribed, or "
                                           "not visible with this token)"}, 404)
        return json_response(found)

    async def events(request: Request) -> StreamingResponse:
        async def stream():
            version = 0
            yield "retry: 2000\n\n"
            while not (collector.stopped or await request.is_disconnected()):
                newer, current = await anyio.to_thread.run_sync(collector.wait, version, KEEPALIVE_S)
                if newer == version:
                    yield ": still here\n\n"
                    continue
                version = newer
                yield f"event: network\ndata: {dumps(current)}\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})

    async def page(request: Request) -> FileResponse:
        return FileResponse(STATIC / "index.html")

    async def subscription_page(request: Request) -> FileResponse:
        return FileResponse(STATIC / "subscription.html")

    async def plotly_js(request: Request) -> FileResponse:
        return FileResponse(PLOTLY_JS, media_type="text/javascript")

    async def no_icon(request: Request) -> Response:
        return Response(status_code=204)

    return Starlette(middleware=[Middleware(GZipMiddleware, minimum_size=2048)], routes=[
        Route("/", page),
        Route("/favicon.ico", no_icon),
        Route("/subscription/{sid:path}", subscription_page),
        Route("/api/network", network),
        Route("/api/history", history),
        Route("/api/subscriptions/{sid:path}", subscription),
        Route("/api/events", events),
        Route("/vendor/plotly.min.js", plotly_js),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ])


class WebView:
    """The collector and the HTTP server, together: started in the background by ``network
    up``/``deploy up``/``demo --ui-port``, or in the foreground by ``streamglobe ui``."""

    def __init__(self, collector: Collector, host: str = "127.0.0.1", port: int = 8080) -> None:
        self.collector = collector
        config = uvicorn.Config(make_app(collector), host=host, port=port, log_level="warning",
                                timeout_graceful_shutdown=2, lifespan="off")
        self.server = uvicorn.Server(config)
        self.url = f"http://{host}:{port}/"
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        """In the foreground, until interrupted (Ctrl-C)."""
        self.collector.start()
        try:
            self.server.run()
        finally:
            self.collector.stop()

    def start(self) -> "WebView":
        self.collector.start()
        self._thread = threading.Thread(target=self.server.run, name="ui-server", daemon=True)
        self._thread.start()
        return self

    def wait_started(self, timeout_s: float = 10.0) -> bool:
        """Whether the server listens (it may fail to: a port in use is reported by uvicorn)."""
        deadline = threading.Event()
        for _ in range(int(timeout_s / 0.05)):
            if self.server.started:
                return True
            if self._thread is not None and not self._thread.is_alive():
                return False
            deadline.wait(0.05)
        return self.server.started

    def stop(self) -> None:
        self.collector.stop()  # first: the event streams end with it
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
