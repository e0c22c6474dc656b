"""How often and how eagerly a super-peer re-plans the subscriptions registered at it
(DESIGN.md §12): ``superpeer serve --reoptimise-every/--reoptimise-margin/--reoptimise-cooldown``
and ``--no-reoptimise``; ``--no-adaptive-sampling``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReoptimisationSettings:
    enabled: bool = True
    every_s: float = 5.0  # a round over every subscription at least this often (and on events)
    margin: float = 0.10  # a move must lower the network's cost by this share of the subscription's
    cooldown_s: float = 10.0  # no re-plan of a subscription within this long of its last one
    adaptive: bool = True  # approximate subscriptions' samples follow the pressure (``adaptive_sampling``)

    def __post_init__(self) -> None:
        if not 0 <= self.margin < 1:
            raise ValueError(f"reoptimise margin {self.margin}: a fraction in [0, 1), such as 0.1")
        if self.every_s <= 0 or self.cooldown_s < 0:
            raise ValueError("reoptimise interval must be above zero and the cool-down not below zero")
