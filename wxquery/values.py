"""XQuery value semantics shared by every evaluator of WXQuery.

Values compare as numbers: untyped element content is cast to ``xs:double`` exactly as XQuery's
general comparison does (the comparison itself is ``operators.comparisons``), and numbers print
the way XQuery serializes them. The executors (inline, Spark) and the reference evaluator must
all use these functions, so that their results agree with each other and with standard XQuery to
the last digit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from decimal import Decimal

# xs:double lexical space (XSD 1.1 also allows a leading '+' in INF).
# (ASCII digits and XML's whitespace only: Python's float() also takes "１" and a no-break space)
_DOUBLE_RE = re.compile(r"[ \t\r\n]*(?:[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?INF|NaN)[ \t\r\n]*\Z")
NAN = float("nan")


def cast_double(text: str | None) -> float:
    """Cast untyped text to xs:double; text outside the lexical space becomes NaN.

    XQuery would raise FORG0001 for a non-numeric value; a stream processor must not stop on one
    bad item, and NaN makes every comparison false, which is what a missing value does as well.
    """
    if text is None:
        return NAN
    try:
        value = float(text)
    except ValueError:
        return NAN
    # float() also accepts 'inf', 'nan', 'infinity' and '1_000', which xs:double does not.
    if _DOUBLE_RE.match(text) is None:
        return NAN
    return value


def format_double(x: float) -> str:
    """Serialize an xs:double as XQuery 3.1 casts it to xs:string (shortest round-trip digits).

    Nearly every double lies between 1e-4 and 1e6, where ``repr`` is already the answer: that
    case is tested first (NaN, infinities and zeros fail the test)."""
    ax = abs(x)
    if 1e-4 <= ax < 1e6:  # repr is already the shortest round-trip digits, without exponent
        text = repr(float(x))  # (a numpy double's repr names its type)
        return text[:-2] if text.endswith(".0") else text
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "INF" if x > 0 else "-INF"
    if x == 0:
        return "-0" if math.copysign(1.0, x) < 0 else "0"
    if 1e-6 <= ax < 1e6:
        return format_decimal(Decimal(repr(x)))
    # Scientific form: mantissa with at least one fractional digit, e.g. 1.0E7, 1.2345E-7.
    sign, digits, exponent = Decimal(repr(x)).as_tuple()
    digits_str = "".join(map(str, digits)).rstrip("0") or "0"
    exp10 = exponent + len(digits) - 1
    mantissa = digits_str[0] + "." + (digits_str[1:] or "0")
    return ("-" if sign else "") + mantissa + "E" + str(exp10)


def format_decimal(d: Decimal) -> str:
    """Canonical xs:decimal: no exponent, no trailing fractional zeros, no '-0'."""
    text = format(d, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    if text in ("-0", ""):
        text = "0"
    return text


def format_atomics(values: Iterable[object]) -> list[str]:
    """``format_atomic`` of each value, a column at a time: a driver writes thousands of window
    records a batch, and here a double in ``format_double``'s common range costs no call (tests
    check the two agree: ``test_window_texts``)."""
    out = []
    for v in values:
        if type(v) is float and 1e-4 <= abs(v) < 1e6:  # as format_double's first case
            out.append(repr(v).removesuffix(".0"))
        else:
            out.append(format_atomic(v))
    return out


def format_atomic(value: object) -> str:
    """Any atomic value as XQuery serializes it (a double, the common case, tested first)."""
    if type(value) is float:
        return format_double(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format_double(value)
    if isinstance(value, Decimal):
        return format_decimal(value)
    return str(value)


def string_literal(value: str) -> str:
    """An XQuery string literal of ``value``, as XQuery reads it back: a quote doubled, ``&``
    and ``<`` as references, control characters as character references (one line)."""
    text = value.replace("&", "&amp;").replace("<", "&lt;").replace('"', '""')
    return '"' + _CONTROL.sub(lambda m: f"&#{ord(m.group())};", text) + '"'


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
