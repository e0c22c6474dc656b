"""Where a subscription planned again after a failure resumes (``recovery.resume``): after the
last item its runtime was fed, per input — or nowhere (recomputed from its first item), with the
reason, where the items before that point still matter or the point is not known. Real
analysis of real queries, a real runtime fed as the data plane feeds it."""

from __future__ import annotations

from sharing.analysis import analyze
from sharing.scenarios import example_query
from superpeer.recovery.resume import resume_points
from superpeer.subscriptions.record import SubscriptionRecord
from superpeer.subscriptions.runtime import SubscriptionRuntime
from superpeer.data.items import parse_batch


def record_of(query: str) -> SubscriptionRecord:
    runtime = SubscriptionRuntime("s", analyze(query), 100_000)
    return SubscriptionRecord(runtime, None, {"p": "SP1.1"})


def photons(n: int) -> list:
    return parse_batch(["<photon><en>1.5</en></photon>"] * n, "photon")


def test_a_per_item_subscription_resumes_after_the_last_item_fed() -> None:
    record = record_of(example_query("q1"))
    assert resume_points(record, {}, moving=False) == ({}, "$p has not received an item yet")
    record.runtime.feed("p", photons(3), False, range(40, 43))
    record.runtime.feed("p", photons(2), False, [57, 90])
    assert resume_points(record, {}, moving=False) == ({"p": 91}, "")
    assert resume_points(record, {}, moving=True)[0] == {}  # (its switch holds the runtime)


def test_an_item_whose_origin_is_not_known_means_recomputing() -> None:
    record = record_of(example_query("q1"))
    record.runtime.feed("p", photons(2), False, range(0, 2))
    record.runtime.feed("p", photons(1), False, None)  # (one that does not say: Spark after a restart)
    record.runtime.feed("p", photons(1), False, range(5, 6))
    points, why = resume_points(record, {}, moving=False)
    assert points == {} and "did not say which item" in why


def test_windows_in_the_network_and_samples_are_recomputed_the_past_resumes() -> None:
    windowed = record_of(example_query("q3"))
    assert "not per-item" in resume_points(windowed, {}, moving=False)[1]
    sampled = record_of(example_query("q1"))
    sampled.sample = 4
    assert resume_points(sampled, {}, moving=False)[1] == "it reads a sample"
    past = record_of(example_query("q1"))
    past.from_start = True  # (its replay goes on from where it stood)
    past.runtime.feed("p", photons(1), False, range(7, 8))
    assert resume_points(past, {}, moving=False) == ({"p": 8}, "")
