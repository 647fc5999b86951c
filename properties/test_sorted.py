"""P15 on the sorted chunks alone: ``Sorted`` against a plain sorted list.

The deadlines and each level's flow heads keep their entries in ``Sorted``
(``core/permits/core/_sorted.py``). Through any mix of inserts, deletes by
key, deletes of the first entry and deletes of every entry below a key, it
holds exactly the entries a sorted list holds, in the same order, and its
chunks stay within P15's bounds after every step. A machine needs hundreds
of waiters with deadlines, or of flows waiting at one level, before it has
more than one chunk, which the machines' own properties seldom draw; here
every step moves up to three chunks' worth of entries.
"""

from __future__ import annotations

import random

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from permits.core._sorted import CHUNK, Sorted

#: A key's bits below its value, as the machine's keys have (a push order).
ORDER = 32


class SortedAgainstAList(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.entries: Sorted[str] = Sorted()
        self.model: list[int] = []  # the keys, in order
        self.seq = 0

    def item(self, key: int) -> str:
        return f"item {key}"

    @rule(
        seed=st.integers(0, 2**32),
        count=st.integers(1, 3 * CHUNK),
        spread=st.sampled_from([0, 3, 1000, 10**9]),
    )
    def insert(self, seed: int, count: int, spread: int) -> None:
        """``count`` entries, their values drawn from ``0..spread`` (0: all
        equal, so in push order; a small spread: many ties)."""
        rng = random.Random(seed)
        for _ in range(count):
            key = (rng.randint(0, spread) << ORDER) + self.seq
            self.seq += 1
            self.entries.insert(key, self.item(key))
            self.model.append(key)
        self.model.sort()

    @rule(seed=st.integers(0, 2**32), share=st.sampled_from([0.1, 0.5, 0.9, 1.0]))
    def delete(self, seed: int, share: float) -> None:
        """That share of the entries, each deleted by its key, in any order."""
        rng = random.Random(seed)
        gone = rng.sample(self.model, int(len(self.model) * share))
        for key in gone:
            self.entries.delete(key)
        left = set(self.model) - set(gone)
        self.model = [key for key in self.model if key in left]

    @rule(count=st.integers(1, 3 * CHUNK))
    def delete_first(self, count: int) -> None:
        for _ in range(min(count, len(self.model))):
            self.entries.delete_first()
            del self.model[0]

    @rule(seed=st.integers(0, 2**32), exact=st.booleans())
    def pop_below(self, seed: int, exact: bool) -> None:
        """Every entry below a key: one of the entries' own keys (``exact``),
        or any key up to past the last."""
        rng = random.Random(seed)
        if exact and self.model:
            key = rng.choice(self.model)
        else:
            top = self.model[-1] + 2 if self.model else 2
            key = rng.randint(0, top)
        below = [k for k in self.model if k < key]
        assert self.entries.pop_below(key) == [self.item(k) for k in below], "P15"
        self.model = self.model[len(below) :]

    @invariant()
    def the_same_entries_within_the_bounds(self) -> None:
        """The list's entries, in its order; the chunks within P15's bounds:
        none empty or above ``2 * CHUNK``, neighbours holding ``CHUNK``
        together, fewer than ``2n / CHUNK + 2`` in all."""
        assert self.entries.entries() == [(k, self.item(k)) for k in self.model], "P15"
        self.entries.check_chunks("entry")
        n = len(self.model)
        assert len(self.entries.chunks) < 2 * n / CHUNK + 2, ("P15", len(self.entries.chunks))
        assert self.entries.firsts[:1] == self.model[:1], "P15: the least key"


TestSortedAgainstAList = SortedAgainstAList.TestCase
