"""Any string as an XML name and back: escapes next to escapes, text that looks like one, and
codes no character has."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from thinpeer.formats.names import escape_name, is_name, unescape_name

tricky = st.text(alphabet=st.sampled_from(list("_x0A5F:  é\U0001F600ab1-.")), max_size=14)


@settings(max_examples=500)
@given(tricky | st.text(max_size=12))
def test_every_string_becomes_a_name_and_comes_back(s):
    name = escape_name(s)
    assert is_name(name)
    assert unescape_name(name) == s


def test_escapes_that_meet_and_codes_beyond_unicode():
    assert unescape_name(escape_name("_x0041 ")) == "_x0041 "  # not "Ax0020_"
    assert unescape_name("_xFFFFFFFF_") == "_xFFFFFFFF_"  # no such character: left as it is
    assert escape_name("") == "_x_" and unescape_name("_x_") == ""
    assert escape_name("Sun Distance") == "Sun_x0020_Distance"
