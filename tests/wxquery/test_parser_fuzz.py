"""Property-based: the parser raises nothing but WXQueryError, whatever the input."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sharing.analysis import analyze
from sharing.scenarios import example_query
from wxquery.errors import WXQueryError

Q1 = example_query("q3")

TOKENS = ["<r>", "</r>", "<e/>", "{", "}", "(", ")", "[", "]", "for", "let", "where", "return",
          "$p", "$w", "$a", "in", "stream(\"photons\")", "/photons", "/photon", "/en", "|",
          "count", "diff", "step", "10", "-1", "0", "1.5", "avg(", "sum(", "and", "or", ">=", "<",
          "=", "+", "-", ":=", ",", "if", "then", "else", ".", "//", "@", "*", "\"", "(:", ":)",
          "&lt;", "&", " ", "\n", "det_time"]


def _analyze(text: str) -> None:
    try:
        analyze(text)
    except WXQueryError:
        pass


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.text(max_size=200))
def test_random_text(text: str):
    _analyze(text)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=40))
def test_random_token_soup(tokens: list[str]):
    _analyze(" ".join(tokens))
    _analyze("".join(tokens))


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=len(Q1)), st.integers(min_value=0, max_value=40),
       st.text(max_size=5))
def test_mutated_paper_query(at: int, cut: int, insert: str):
    _analyze(Q1[:at] + insert + Q1[at + cut:])
