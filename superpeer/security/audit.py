"""Every refusal a super-peer makes, logged in one place (who, what, when — never a token)."""

from __future__ import annotations

import logging
import time

from ..errors import NodeError

audit = logging.getLogger("streamglobe.audit")


def deny(who: str, what: str, why: str, code: str = "PERMISSION_DENIED") -> NodeError:
    """Log a refusal (who, what, when — never a token) and return the error to raise."""
    audit.warning("denied %r: %r at %s (%r)", who or "an unknown caller", what,
                  time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), why)
    return NodeError(code, why)
