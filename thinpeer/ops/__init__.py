"""Operations tooling of the thin peer: running, securing and watching networks of super-peers
(``launcher``: one interface over ``processes`` and ``containers``; ``certs``, ``tokens``,
``topologies``, ``ports``, ``demo``, the web view ``ui``). Apart from the client library
(``thinpeer.client``, ``thinpeer.credentials``), which needs none of it."""
