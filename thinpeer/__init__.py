"""The thin peer: the client library (``client``, ``credentials``, ``approximation``), which a
program that publishes or subscribes imports, and apart from it the ``streamglobe`` command line
(``cli``) and the operations tooling (``ops``: launchers, keys, the web view)."""

import os as _os

# A daemon forks only to exec (PySpark starts the Spark JVM with a ``preexec_fn``, which makes
# ``subprocess`` fork rather than spawn). gRPC's fork support, on by default in its core, runs
# handlers around every fork, and a fork while gRPC threads were polling corrupted the parent's
# poller: "epoll_wait error: Bad file descriptor", and once a daemon dead at start-up ("Check
# failed: next_worker->state == KICKED"). Off unless asked for; gRPC reads it when first
# imported, so it is set by this package (and by ``superpeer``) before either imports grpc.
_os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
