"""Queries nested ``n`` levels deep, one builder per construct that nests, with the token each
level opens with (where a "nested too deeply" error must point)."""

from __future__ import annotations

from collections.abc import Callable

S = 'stream("s")/s/i'


def constructors(n: int) -> str:
    return f"<r>{{ for $p in {S} return " + "<a>" * n + "{ $p/x }" + "</a>" * n + " }</r>"


def enclosed(n: int) -> str:
    return f"<r>{{ for $p in {S} return " + "<a>{ " * n + "$p/x" + " }</a>" * n + " }</r>"


def parentheses(n: int) -> str:
    return f"<r>{{ for $p in {S} return " + "(" * n + "$p/x" + ")" * n + " }</r>"


def condition_groups(n: int) -> str:
    return f"<r>{{ for $p in {S} where " + "(" * n + "$p/x > 1" + ")" * n + " return $p/x }</r>"


def predicate_groups(n: int) -> str:
    return f"<r>{{ for $p in {S}[" + "(" * n + "x > 1" + ")" * n + "] return $p/x }</r>"


def flwrs(n: int) -> str:
    body = f"$v{n}/x"
    for i in range(n, 0, -1):
        body = f"for $v{i} in $v{i - 1}/y return {body}"
    return f"<r>{{ for $v0 in {S} return {body} }}</r>"


def for_bindings(n: int) -> str:
    """One FLWR with n for bindings, each over the previous variable (each nests the rest)."""
    bindings = "".join(f", $v{i} in $v{i - 1}/y" for i in range(1, n))
    return f"<r>{{ for $v0 in {S}{bindings} return $v0/x }}</r>"


def let_bindings(n: int) -> str:
    lets = ", ".join(f"$a{i} := count($w/x)" for i in range(n))
    return f"<r>{{ for $w in {S} |count 2| let {lets} return <c>{{ $a0 }}</c> }}</r>"


def ifs(n: int) -> str:
    body = "$p/x"
    for i in range(n):
        body = f"if ($p/x > {i}) then {body} else ()"
    return f"<r>{{ for $p in {S} return {body} }}</r>"


def sequences(n: int) -> str:
    body = "$p/x"
    for _ in range(n):
        body = f"($p/x, {body})"
    return f"<r>{{ for $p in {S} return {body} }}</r>"


# builder, the token(s) that open one level of it (in a sequence, the level is its first item)
DEEP: dict[str, tuple[Callable[[int], str], str | tuple[str, ...]]] = {
    "constructors": (constructors, "<a>"),
    "enclosed": (enclosed, "<a>"),
    "parentheses": (parentheses, "("),
    "condition_groups": (condition_groups, "("),
    "predicate_groups": (predicate_groups, "("),
    "flwrs": (flwrs, "for $v"),
    "for_bindings": (for_bindings, "$v"),
    "let_bindings": (let_bindings, ("$a", "$w/x)")),  # a binding, or the argument in it
    "ifs": (ifs, "if ("),
    "sequences": (sequences, ("(", "$p/x, (")),
}
