"""Stream widening: a near miss served by widening a running stream (the StreamGlobe paper,
Section 6; issue 31).

A new subscription whose predicate is a little wider than a running stream's, or which needs
an element the stream does not carry, cannot reuse it and would get a stream of its own from
the stream's parent. Widening offers the planner a third way: one stream ``W`` computed where
the running stream ``S`` is, from the same parent, along the same route, with the **hull** of
both — every range bound the two have on the same element, loosened to the wider of the two
(bounds only one of them has are dropped, relations between elements kept only where both have
them), and the elements both carry. ``W`` serves the new subscription (a residual of its own
where it takes it) and every consumer of ``S`` (their residual: ``S``'s predicate and
projection); once they have moved onto it — re-optimisation moves each, live and exactly,
since ``S`` then costs only them — ``S`` is removed. So the part is priced at what ``W`` and
its residual cost *less* what ``S`` costs now: what the network carries once the move is done.

A super-peer whose readers can be given a residual where they stand (the inline executor)
widens ``S`` **in place** instead (``in_place``): ``S`` keeps its id and route, its readers get
its own predicate and projection in front of them, then the operators computing ``S`` take the
hull, and the new subscription reads ``S`` as any reused stream
(``superpeer.control.widening_in_place``). No second stream flows, nobody has to move.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from wxquery.operators import definitions as alg

from .atom_hull import hull_atoms
from .matching import UNKNOWN, Repetition, match_properties
from .plans import InPlace, PlanPart
from .stream_properties import InputProperties, Projection, Selection
from .stream_table import NetworkStream

def hull(stream: InputProperties, sub: InputProperties, repetition: Repetition = UNKNOWN) -> InputProperties | None:
    """The narrowest per-item properties serving both (None: there is none worth offering);
    ``repetition``: what the input's statistics know of its elements (``matching``)."""
    if stream.input != sub.input or not stream.per_item or sub.unknown or sub.sample != 1:
        return None
    selection = None
    if stream.selection is not None and sub.selection is not None:
        atoms = hull_atoms(stream.selection.atoms, sub.selection.atoms)
        selection = Selection(atoms) if atoms else None
    projection = Projection(stream.projection.output | sub.projection.referenced,
                            stream.projection.referenced | sub.projection.referenced)
    widened = replace(stream, selection=selection, projection=projection)
    if widened == stream:
        return None
    if not (match_properties(widened, sub, repetition).shareable
            and match_properties(widened, stream, repetition).shareable):
        return None
    return widened


def in_place(part: PlanPart, streams: Mapping[str, NetworkStream], repetition: Repetition = UNKNOWN) -> PlanPart:
    """A widening part (``planner.widened_parts``) as the widening of its stream in place: the
    wide stream takes the running one's id, so the part reuses that stream, and its new
    streams are only those the subscription takes it with. The part as it is when that cannot
    be (not a widening, the stream not in ``streams``, no residual of selections and
    projections)."""
    was = streams.get(part.widened) if part.widened else None
    if was is None or not was.operators or not part.new_streams or part.in_place is not None:
        return part  # (a copy of its parent is not computed: nothing there to widen)
    w = part.new_streams[0]
    match = match_properties(w.properties, was.properties, repetition)
    if not match.shareable or not all(isinstance(op, (alg.Select, alg.Project)) for op in match.residual):
        return part
    wide = replace(was, properties=w.properties, operators=w.operators, usage=w.usage, estimate=w.estimate,
                   users=set(was.users))
    rest = [replace(s, parent=was.id if s.parent == w.id else s.parent) for s in part.new_streams[1:]]
    result = was.id if part.result_stream == w.id else part.result_stream
    shared = 0  # (where the subscription takes it: the last peer its route shares with the stream's)
    while shared + 1 < min(len(part.route), len(was.route)) and part.route[shared + 1] == was.route[shared + 1]:
        shared += 1
    return replace(part, reused=was.id, reuse_peer=was.route[shared], new_streams=rest, result_stream=result,
                   in_place=InPlace(wide, was, tuple(match.residual)), alternatives=[])
