"""Where each neighbour's batches of each stream stand at this super-peer: a retried batch is
taken once.

A sender numbers the items it sends of a stream on a link (``first_sequence`` of a batch) and
retries a batch until it is acknowledged; a batch whose reply was lost (a timeout, a dropped
connection) arrives twice. The receiver keeps, per (sender, sender's epoch, stream), the next
number it expects and takes only the items past it, and its reply acknowledges everything before
that number. The sender's epoch (a new one per process start) keeps a restarted sender, which
numbers from zero again, from being taken for a replay of its former self.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Key = tuple[str, str, str]  # sender, sender's epoch, stream


@dataclass
class LinkReceipts:
    next: dict[Key, int] = field(default_factory=dict)
    epochs: dict[str, str] = field(default_factory=dict)  # each sender's newest epoch
    duplicates: int = 0  # items received again (and dropped)
    gaps: int = 0  # items a sender skipped: lost before they reached this peer
    last_gap: str = ""

    def admit(self, key: Key, first: int, count: int) -> tuple[int, int]:
        """How many leading items of the batch were already taken, and the acknowledgement (the
        next number expected once the batch is taken). The first batch of a key starts it; a
        sender's new epoch (it was restarted) drops what was kept for its former self."""
        sender, epoch, _ = key
        if self.epochs.get(sender, epoch) != epoch:
            for old in [k for k in self.next if k[0] == sender and k[1] != epoch]:
                del self.next[old]
        self.epochs[sender] = epoch
        if not count and key not in self.next:
            return 0, first  # (an end or a watermark alone does not start the numbering)
        expected = self.next.get(key, first)
        if first > expected:
            self.gaps += first - expected
            self.last_gap = f"{key[2]} from {key[0]}: items {expected}..{first - 1} never arrived"
            expected = first
        skip = min(expected - first, count)
        self.duplicates += skip
        self.next[key] = max(expected, first + count)
        return skip, self.next[key]

    def drop(self, key: Key) -> None:
        """The stream is not here (any more): its numbering starts again if it comes back."""
        self.next.pop(key, None)
