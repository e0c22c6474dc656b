"""Subscriptions whose results are their input's items, as they arrive (issue 32).

``for $p in stream("photons")/photons/photon where … return $p`` — the commonest subscription —
asks for the items themselves. Once the network has applied every condition upstream, the
subscriber's super-peer has nothing left to compute, yet post-processing parses every item,
walks it through the evaluator and serialises it again: two thirds of a subscriber's CPU per
item on the forwarding benchmark's pipeline. Such a subscription can take the wire text of each
item as its result instead. The text is the item exactly as it was accepted where it entered
the network (or as an upstream operator wrote it); it is the same XML as the serialisation
post-processing would produce, though not always the same characters (an attribute quoted with
``'``, a character reference, a CDATA section stay as they were published).

Pure: which query shapes qualify, decided on the checked query and what the plan applies
upstream.
"""

from __future__ import annotations

from . import ast
from .static_checks import CheckedQuery


def passed_through(checked: CheckedQuery, applied: frozenset[int], aggregated: frozenset[int],
                   items: tuple[str, ...]) -> str | None:
    """The variable whose items are the subscription's results unchanged, or None: the body is
    one FLWR (or one inside a root constructor without attributes) with a single ``for`` over
    the stream's items themselves (``items``: the path from the document node to them), no
    window, every condition applied upstream (``applied``: ids of comparisons), and it returns
    the bound variable itself."""
    body = checked.query.body
    if isinstance(body, ast.ElementConstructor):
        if body.attributes or len(body.content) != 1 or not isinstance(body.content[0], ast.Enclosed):
            return None
        body = body.content[0].expr
    if not isinstance(body, ast.FLWR) or len(body.clauses) != 1 or aggregated:
        return None
    clause = body.clauses[0]
    if not isinstance(clause, ast.ForClause) or clause.window is not None:
        return None
    source = clause.source
    if not isinstance(source.root, ast.StreamCall) or source.names != items:
        return None
    if body.where is not None and body.where.terms:  # ('or', 'not()': evaluated here)
        return None
    conditions = [*(body.where.atoms if body.where is not None else ()),
                  *(a for step in source.steps for c in step.predicates for a in c.atoms)]
    if any(id(a) not in applied for a in conditions):
        return None
    ret = body.ret
    if not (isinstance(ret, ast.PathExpr) and not ret.steps and isinstance(ret.root, ast.VarRef)
            and ret.root.name == clause.var):
        return None
    binding = checked.bindings.get(id(ret.root))
    if binding is None or binding.clause is not clause or binding.sub_path:
        return None
    return clause.var
