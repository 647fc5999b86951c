"""The core's grant loop as an ideal skeleton: how close could pure Python come?

    python bench/skeleton.py [--no-valgrind]

The loop of ``bench/core.py`` at 10^4 waiting (strict priority, two levels),
run on a flat class that does the same steps as ``permits.core.Machine``
with every helper inlined and nothing else: the type checks of push and
tick, one FIFO line per level, the policy's choice through a call, the
exact pacing arithmetic, the wait histogram, the refund log and a
``Decision`` per grant. No deadline heap, no queue limits, no dead-entry
bookkeeping, no duplicate check beyond a dict lookup. It is not a limiter
anyone should use (it assumes the loop's shape); it bounds what a rewrite of
the real machine in pure Python could win. Variants leave pieces out, to
show what each costs. Best of 3 runs of 200,000 grants, beside the bare
heapq floor; then, when valgrind is on the machine, the same loops in
instructions per grant counted by callgrind (loops of 40,000 minus 20,000
grants), which come out nearly the same on every run.
"""

from __future__ import annotations

import gc
import heapq
import shutil
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

from _callgrind import instructions as instructions_of
from _options import check_options

WAITING = 10_000
GRANTS = 200_000
P, Q = 10**9, 1_000  # the interval, P / Q ns: 1,000 permits per second
BITS = 8


class Waiter(NamedTuple):
    id: int
    level: int
    seq: int
    pushed_at: int
    deadline: int | None


class Decision(NamedTuple):
    id: int
    state: str
    level: int
    at: int
    waited: int


_new = tuple.__new__
Entry = tuple[Waiter, int, int, int]


def strict(depths: list[int]) -> int:
    for level, depth in enumerate(depths):
        if depth:
            return level
    raise AssertionError("nobody waits")


class Skeleton:
    __slots__ = (
        "anchor",
        "by_id",
        "choose",
        "counts",
        "decisions",
        "depths",
        "due",
        "histogram",
        "k",
        "levels",
        "lines",
        "log",
        "maxima",
        "now",
        "refundable",
        "seq",
    )

    def __init__(self, histogram: bool, log: bool, decisions: bool) -> None:
        self.levels = 2
        self.now = 0
        self.due = 1
        self.anchor = 0
        self.k = 0
        self.seq = 0
        self.by_id: dict[int, Waiter] = {}
        self.lines: list[deque[Waiter]] = [deque(), deque()]
        self.depths = [0, 0]
        self.counts: list[dict[int, int]] = [{}, {}]
        self.maxima = [-1, -1]
        self.log: deque[Entry] = deque()
        self.refundable: dict[int, Entry] = {}
        self.choose: Callable[[list[int]], int] = strict
        self.histogram, self.decisions = histogram, decisions
        if not log:
            self.log = deque(maxlen=0)

    def push(self, id: int, level: int, now: int) -> list[Decision]:
        if level.__class__ is not int or not 0 <= level < self.levels:
            raise TypeError(level)
        if now.__class__ is not int or now < self.now:
            raise ValueError(now)
        by_id = self.by_id
        if id in by_id:
            raise ValueError(id)
        self.now = now
        seq = self.seq
        self.seq = seq + 1
        waiter = _new(Waiter, (id, level, seq, now, None))
        by_id[id] = waiter
        self.lines[level].append(waiter)
        self.depths[level] += 1
        return []

    def next_due(self) -> int:
        due, now = self.due, self.now
        return due if due > now else now

    def tick(self, now: int) -> list[Decision]:
        if now.__class__ is not int or now < self.now:
            raise ValueError(now)
        self.now = now
        out: list[Decision] = []
        by_id, depths, log = self.by_id, self.depths, self.log
        if not by_id or now < self.due:
            return out
        while True:
            level = self.choose(depths)
            if level.__class__ is not int or not 0 <= level < self.levels or not depths[level]:
                raise RuntimeError(level)
            waiter = self.lines[level].popleft()
            id = waiter.id
            del by_id[id]
            depths[level] -= 1
            # The machine's exact pacing: interval = P / Q ns, burst 1.
            k, anchor = self.k, self.anchor
            entry = (waiter, now, anchor, k)
            if k * P < (now - 1 - anchor) * Q:
                anchor = self.anchor = now - 1
                k = 0
            k += 1
            self.k = k
            due = self.due = anchor - ((0 - k) * P // Q)
            wait = now - waiter.pushed_at
            if self.histogram:
                counts = self.counts[level]
                shift = wait.bit_length() - BITS
                bucket = wait >> shift << shift if shift > 0 else wait
                counts[bucket] = counts.get(bucket, 0) + 1
                if wait > self.maxima[level]:
                    self.maxima[level] = wait
            if log.maxlen != 0:
                self.refundable[id] = entry
                log.append(entry)
                if len(log) > 2 * 1000:  # two seconds of grants, as the machine keeps
                    old = log.popleft()
                    if self.refundable.get(old[0].id) is old:
                        del self.refundable[old[0].id]
            if self.decisions:
                out.append(_new(Decision, (id, "granted", level, now, wait)))
            if now < due or not by_id:
                return out


def skeleton_loop(
    histogram: bool = True, log: bool = True, decisions: bool = True, grants: int = GRANTS
) -> float:
    machine = Skeleton(histogram, log, decisions)
    for id in range(WAITING):
        machine.push(id, id % 2, 0)
    push, tick, next_due = machine.push, machine.tick, machine.next_due
    now = 0
    gc.collect()
    start = time.perf_counter()
    for id in range(WAITING, WAITING + grants):
        push(id, id & 1, now)
        now = next_due()
        tick(now)
    elapsed = time.perf_counter() - start
    assert len(machine.by_id) == WAITING
    return elapsed / grants


def heapq_loop(grants: int = GRANTS) -> float:
    heap = [(id % 2, id, id) for id in range(WAITING)]
    heapq.heapify(heap)
    push, pop = heapq.heappush, heapq.heappop
    gc.collect()
    start = time.perf_counter()
    for id in range(WAITING, WAITING + grants):
        push(heap, (id & 1, id, id))
        pop(heap)
    return (time.perf_counter() - start) / grants


VARIANTS: list[tuple[str, dict[str, bool]]] = [
    ("every step the contract needs", {}),
    ("without the histogram", {"histogram": False}),
    ("without the refund log", {"log": False}),
    ("without the Decision", {"decisions": False}),
    ("without all three", {"histogram": False, "log": False, "decisions": False}),
]


def _count(which: int, grants: int) -> int:
    """Instructions (callgrind) of a process running one loop: variant
    ``which``, or the floor for -1."""
    return instructions_of(__file__, "--count-one", str(which), str(grants))


def instructions(grants: int = 20_000) -> None:
    print()
    print(
        f"Instructions per grant (valgrind --tool=callgrind; loops of {2 * grants:,} "
        f"minus {grants:,} grants):"
    )
    print()
    print("| skeleton | instructions per grant | x floor |")
    print("| --- | ---: | ---: |")
    per = {
        which: (_count(which, 2 * grants) - _count(which, grants)) / grants
        for which in range(-1, len(VARIANTS))
    }
    for which, (name, _) in enumerate(VARIANTS):
        print(f"| {name} | {per[which]:,.0f} | {per[which] / per[-1]:.2f}x |")
    print(f"| bare heapq push+pop (floor) | {per[-1]:,.0f} | |")


def main() -> None:
    floor = min(heapq_loop() for _ in range(3))
    print(f"{WAITING:,} waiting, {GRANTS:,} grants, best of 3; floor {floor * 1e9:.0f} ns")
    print()
    print("| skeleton | ns per grant | x floor |")
    print("| --- | ---: | ---: |")
    for name, leave_out in VARIANTS:
        cost = min(skeleton_loop(**leave_out) for _ in range(3))
        print(f"| {name} | {cost * 1e9:,.0f} | {cost / floor:.2f}x |")
    if shutil.which("valgrind") is not None and "--no-valgrind" not in sys.argv:
        instructions()


if __name__ == "__main__":
    check_options(__doc__, "--no-valgrind", "--count-one")
    if "--count-one" in sys.argv:
        at = sys.argv.index("--count-one")
        which, count = int(sys.argv[at + 1]), int(sys.argv[at + 2])
        if which < 0:
            heapq_loop(count)
        else:
            skeleton_loop(**VARIANTS[which][1], grants=count)
    else:
        main()
