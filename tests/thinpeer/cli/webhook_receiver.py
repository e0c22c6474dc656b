"""A webhook receiver for the sink tests: a real HTTP server that records every POST (its
idempotency key, first offset, count and body) as one JSON line, synced before it answers 200.

Run: ``python webhook_receiver.py PORT FILE``; prints ``ready`` once it listens."""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    port, path = int(sys.argv[1]), sys.argv[2]

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers["Content-Length"])).decode("utf-8")
            record = {"key": self.headers["Idempotency-Key"],
                      "first": self.headers["X-StreamGlobe-First-Offset"],
                      "count": self.headers["X-StreamGlobe-Count"],
                      "type": self.headers["Content-Type"], "body": body}
            with open(path, "a") as f:
                f.write(json.dumps(record) + "\n")
                f.flush()
                os.fsync(f.fileno())
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args) -> None:
            pass

    ThreadingHTTPServer.allow_reuse_address = True
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
