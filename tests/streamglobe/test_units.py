"""One reading of sizes, bit rates and durations (``streamglobe.units``, issue 30): every unit,
round trips through the formatters, and a value of the wrong kind refused naming the unit
expected, never reinterpreted."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamglobe.units import (
    DURATION_UNITS,
    DURATION_WORDS,
    PREFIXES,
    SIZE_UNITS,
    UnitError,
    format_bitrate,
    format_duration,
    format_size,
    parse_bitrate,
    parse_duration,
    parse_item_rate,
    parse_milliseconds,
    parse_size,
    quantity,
)

whole = st.integers(min_value=0, max_value=10 ** 6)


@given(whole, st.sampled_from(sorted(SIZE_UNITS)), st.sampled_from(["", " "]),
       st.sampled_from([str.lower, str.upper, lambda u: u]))
def test_every_size_unit_in_any_case(n: int, unit: str, space: str, case) -> None:
    assert parse_size(f"{n}{space}{case(unit)}") == n * SIZE_UNITS[unit]


@given(whole, st.sampled_from(sorted(PREFIXES)), st.sampled_from(["bit", "bits", "bit/s", "bits/s", "Bit", "BIT/S",
                                                                  "b/s", "bps"]))
def test_every_bit_rate_unit(n: int, prefix: str, unit: str) -> None:
    assert parse_bitrate(f"{n}{prefix}{unit}") == n * PREFIXES[prefix]
    assert parse_bitrate(f"{n} {prefix.upper()}{unit}") == n * PREFIXES[prefix]


@given(whole, st.sampled_from(["", "k", "M", "G", "Ki", "Mi"]), st.sampled_from(["B/s", "byte/s", "bytes/s"]))
def test_bytes_per_second_are_eight_bits_each(n: int, prefix: str, unit: str) -> None:
    assert parse_bitrate(f"{n}{prefix}{unit}") == 8 * n * PREFIXES[prefix.lower()]


@given(st.lists(st.tuples(whole, st.sampled_from(sorted({*DURATION_UNITS, *DURATION_WORDS}))), min_size=1, max_size=4),
       st.sampled_from(["", " "]))
def test_duration_terms_add_up(terms: list[tuple[int, str]], between: str) -> None:
    text = between.join(f"{n}{' ' if len(u) > 2 else ''}{u}" for n, u in terms)
    expected = sum(n * DURATION_UNITS[DURATION_WORDS.get(u, u)] for n, u in terms)
    assert parse_duration(text) == pytest.approx(expected)


@given(st.integers(min_value=0, max_value=2 ** 50))
def test_sizes_round_trip(n: int) -> None:
    assert parse_size(format_size(n)) == n


@given(st.floats(min_value=0, max_value=1e15, allow_nan=False))
def test_bit_rates_round_trip(x: float) -> None:
    assert parse_bitrate(format_bitrate(x)) == x


@given(st.integers(min_value=0, max_value=10 ** 9), st.integers(min_value=0, max_value=999))
def test_durations_round_trip(s: int, ms: int) -> None:
    seconds = s + ms / 1000
    assert parse_duration(format_duration(seconds)) == pytest.approx(seconds, abs=1e-9)


@pytest.mark.parametrize("text, seconds", [("1h30m", 5400), ("90s", 90), ("1 hour 30 minutes", 5400), ("PT10M", 600),
                                           ("2 weeks", 1_209_600), ("P1DT2H", 93600), ("500ms", 0.5), ("2", 2),
                                           (" 2 H ", 7200), ("10 min", 600)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_the_examples_of_the_issue() -> None:
    assert parse_size("10MB") == 10_000_000 and parse_size("32MiB") == 32 * 2 ** 20 and parse_size("1000000") == 10 ** 6
    assert parse_bitrate("10Mbit") == parse_bitrate("10mbit/s") == parse_bitrate("10 Mbps") == 10e6
    assert parse_bitrate("10Mb/s") == 10e6 and parse_bitrate("10MB/s") == 80e6 and parse_bitrate("100e6") == 100e6
    assert parse_milliseconds("100") == 100 and parse_milliseconds("1.5s") == 1500 and parse_milliseconds("20ms") == 20
    assert parse_item_rate("500") == parse_item_rate("500/s") == parse_item_rate("500 items/s") == 500


@pytest.mark.parametrize("parse, text, says", [
    (parse_size, "10Mbit", "expected a size in bytes such as 32MiB, 64MB or 1000000, got '10Mbit' (that is a bit rate)"),
    (parse_size, "10m", "(that is a duration)"),
    (parse_size, "1.5", "whole number of bytes"),
    (parse_bitrate, "10MB", "expected a bit rate in bits per second"),
    (parse_bitrate, "10MB", "(that is a size in bytes, not a rate)"),
    (parse_bitrate, "10m", "(that is a duration)"),
    (parse_bitrate, "10k", "a prefix without a unit"),
    (parse_bitrate, "500/s", "(that is a rate in items per second)"),
    (parse_duration, "64MB", "expected a duration such as 90s, 10m, 1h30m"),
    (parse_duration, "1e3", "exponent"),
    (parse_duration, "1h 2", "not a number with a unit"),
    (parse_duration, "-5", "not a number with a unit"),
    (parse_duration, "10 parsecs", "not a number with a unit"),
    (parse_milliseconds, "0.5ms", "not whole milliseconds"),
    (parse_item_rate, "10Mbit", "(that is a bit rate)"),
])
def test_a_value_of_the_wrong_kind_is_refused_naming_the_unit_expected(parse, text: str, says: str) -> None:
    with pytest.raises(UnitError) as refused:
        parse(text)
    assert says in str(refused.value)


def test_a_long_run_of_digits_is_refused_at_once() -> None:
    with pytest.raises(UnitError):
        parse_duration("1" * 5000 + "!")  # (term after term: no backtracking over the digits)


def test_argparse_prints_the_message_after_the_flag() -> None:
    parser = argparse.ArgumentParser(exit_on_error=False)
    parser.add_argument("--max-item-bytes", type=parse_size)
    with pytest.raises(argparse.ArgumentError) as refused:
        parser.parse_args(["--max-item-bytes", "10Mbit"])
    assert str(refused.value) == ("argument --max-item-bytes: expected a size in bytes such as 32MiB, 64MB or "
                                  "1000000, got '10Mbit' (that is a bit rate)")


def test_every_text_has_at_most_one_kind() -> None:
    kinds = {text: quantity(text).kind for text in ["10MB", "10mb", "10Mbit", "10mb/s", "10MB/s", "10m", "10", "10/s"]}
    assert kinds == {"10MB": "size", "10mb": "size", "10Mbit": "bitrate", "10mb/s": "bitrate", "10MB/s": "bitrate",
                     "10m": "duration", "10": "number", "10/s": "item_rate"}
