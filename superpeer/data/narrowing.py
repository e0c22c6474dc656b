"""The readers of a stream widened in place keep reading the stream they had (issue 31, stream
widening; ``sharing.widening``).

When a running stream ``S`` is widened in place — the operators that make it select more items
or keep more elements — every consumer it had must go on receiving exactly ``S``'s items. So
before the stream widens, each peer on its route puts the **residual** (the selection and
projection that make ``S``'s items from the wider ones) in front of what reads ``S`` there:

* an operator chain computed from ``S`` takes the residual's atoms before its own, and its
  projection (or, where it had none, the residual's): ``narrowed_chain``, applied by the executor
  to the chain it runs, whose window state goes on unchanged;
* a subscription reading ``S`` directly gets a ``NarrowedDelivery`` in front of it.

The residual holds on ``S``'s own items (it is ``S``'s own predicate and projection), so it can
be put in place while ``S`` still flows narrow, and whatever arrives — narrow items still on the
way, wide ones after — reaches the old readers as ``S``'s. Readers that come later read the
wide stream.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from lxml import etree

from wxquery.operators import definitions as alg
from wxquery.operators.chains import Chain, normalise
from wxquery.operators.runner import ChainGroup

from .items import parse_batch
from .origins import picked


def residual_chain(residual: tuple[alg.Operator, ...]) -> Chain:
    """The residual as a chain of its own (a selection and a projection, nothing else)."""
    for op in residual:
        if not isinstance(op, (alg.Select, alg.Project)):
            raise ValueError(f"a widening's residual selects and projects only, not {op}")
    return normalise(0, "~narrow", "~wide", "items", residual)


def narrowed_chain(chain: Chain, residual: Chain) -> Chain:
    """``chain`` reading the wide stream as it read the narrow one: the residual's atoms first,
    then its own; its own projection (within what the narrow stream carried, as every chain
    the planner makes from it), else the narrow stream's."""
    if chain.input_kind != "items" or chain.sample != 1:
        raise ValueError(f"{chain.stream} cannot be narrowed: it reads "
                         f"{'a sample of ' if chain.sample != 1 else ''}{chain.input_kind}")
    return replace(chain, atoms=(*residual.atoms, *chain.atoms),
                   project=chain.project if chain.project is not None else residual.project)


class NarrowedDelivery:
    """What the data plane delivers a widened stream to, in front of a reader that had it
    narrow: the residual over each batch, then the reader (``PeerState.deliveries``)."""

    def __init__(self, inner, residual: Chain) -> None:
        self.inner = inner  # a ``SubscriptionRuntime``, or one side of a ``TrackSwitch``
        self.residual = residual
        self._group = ChainGroup()
        self._group.add(replace(residual, stream="narrow"))

    @property
    def runtime(self):
        return getattr(self.inner, "runtime", self.inner)

    @property
    def switch(self):
        """The switch of plans behind it, if it is in front of one (``subscriptions.track_switch``)."""
        return getattr(self.inner, "switch", None)

    def around(self, reader) -> "NarrowedDelivery":
        """The same residuals in front of another reader (a switch taking over the delivery):
        of a stream widened twice, both."""
        return NarrowedDelivery(rewrapped(self.inner, reader), self.residual)

    def feed(self, variable: str, texts: list, end: bool, origins: Sequence[int] | None = None) -> None:
        out = self._group.push(list(texts), end, origins) if texts else self._group.push([], end)
        items = out.get("narrow", [])
        kept = picked(origins, self._group.offsets.get("narrow", [])) if origins is not None else None
        if not (items or end):
            return
        if wants_text(self.inner):  # (a stream widened twice: a residual in front of another reads text)
            self.inner.feed(variable, items, end, kept)
        else:
            values = parse_batch(items) if items else []
            if values is None:  # (not one clean batch: each alone)
                values = [etree.fromstring(x) for x in items]
            self.inner.feed(variable, values, end, kept)

    def watermark(self, variable: str, path: str, value: float) -> None:
        advance = getattr(self.inner, "watermark", None)
        if advance is not None:
            advance(variable, path, value)


def wants_text(consumer) -> bool:
    """Whether a delivery takes the items' wire text (a subscription passing its items
    through, or a switch of its plans in front of one, or a residual in front of either), not
    parsed items (``data_plane``)."""
    if isinstance(consumer, NarrowedDelivery):
        return True
    return getattr(getattr(consumer, "runtime", consumer), "wants_text", False)


def inner(consumer):
    """The reader behind its narrowings, if any (identity checks look through them)."""
    while isinstance(consumer, NarrowedDelivery):
        consumer = consumer.inner
    return consumer


def rewrapped(consumer, reader):
    """``reader`` in ``consumer``'s place, behind the same narrowing if it had one."""
    return consumer.around(reader) if isinstance(consumer, NarrowedDelivery) else reader
