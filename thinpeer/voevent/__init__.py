"""VOEvents in and out of StreamGlobe over the VOEvent Transport Protocol.

``vtp``: the protocol (a subscriber and a sender, plain sockets); ``shape``: a VOEvent as an
attribute-free item and a result as a VOEvent; ``bridge``: a broker's events published to a
stream, exactly once across restarts (``streamglobe connect voevent``). Results go out through
``thinpeer.sinks.vtp`` (``subscribe --to-vtp``).
"""
