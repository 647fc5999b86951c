"""Does the contract have teeth? Break the code on purpose and see what fails.

    python properties/mutants.py [--caught-only] [NAME ...]
    python properties/mutants.py --help     (this, and every mutant's name)

Each mutant edits one place of a copy of ``core/`` (the tree is never
touched), runs ``pytest properties`` on the copy under the ``mutants``
profile (``ci`` without shrinking), and reports the property ids (``P1``...)
named by the failures. A mutant that is caught runs a second time with the
reference-model comparison (P13) switched off, to show which of the direct
properties catch it on their own (``--caught-only`` skips that second run).
A mutant of the simulator (a file under ``core/permits/sim``, named
``sim/...``) runs the simulator's tests instead (``SIM_TESTS``: its
properties, P56 to P61, are carried there), once, and names the tests
that fail. A mutant of an adapter (a file under ``adapters/permits``,
named by its path from the repository, ``adapters/permits/...``) edits a
copy of ``adapters/`` instead, runs on the real ``core/``, and runs the
tests of that adapter's area (``ADAPTER_TESTS``: the conformance suite
for the event-loop and thread adapters, the Redis tests for the Redis
limiter, the HTTP tests for the HTTP integrations, the metrics tests for
the exports, the small Redis client's and the virtual clocks' own, the
command line's for its live run), once, and names the tests that fail
(the first ``MAXFAIL``: a mutant that leaves callers waiting makes many
hang, each until its 30 s timeout). Before any test runs, the mutated
module is imported from the copy, not this tree: a mutant whose copy is
not what the tests would import says so instead of running. A mutant
nothing catches is a hole in the contract.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The simulator's tests, which a mutant of ``core/permits/sim`` runs.
SIM_TESTS = (
    "properties/test_simulator.py",
    "tests/test_sim.py",
    "tests/test_trace.py",
    "tests/test_compare.py",
)

#: The adapters' own calls' properties (P62 to P69), the conformance suite
#: and the random scripts held to a bare machine: what every event-loop
#: adapter (and the thread adapter) promises. (The properties first: they
#: take seconds, and run before ``MAXFAIL`` failures of the others end a run.)
CONFORMANCE = (
    "properties/test_adapter_calls.py",
    "tests/test_adapters.py",
    "properties/test_adapters_differential.py",
)

#: How many failing tests end an adapter mutant's run.
MAXFAIL = 10

#: The tests a mutant of a file under ``adapters/permits`` runs, by that
#: file (its path from the repository): the smallest set that carries the
#: promises of its area, so that a mutant runs in a few minutes.
ADAPTER_TESTS: dict[str, tuple[str, ...]] = {
    # (and the thread adapter's own tests: its interrupts land in the shared code)
    "adapters/permits/adapters/_base.py": (*CONFORMANCE, "tests/test_threads.py"),
    "adapters/permits/adapters/_tasked.py": CONFORMANCE,
    "adapters/permits/adapters/asyncio.py": CONFORMANCE,
    "adapters/permits/adapters/trio.py": CONFORMANCE,
    "adapters/permits/adapters/anyio.py": CONFORMANCE,
    "adapters/permits/adapters/threads.py": (*CONFORMANCE, "tests/test_threads.py"),
    "adapters/permits/adapters/redis.py": ("properties/test_redis_state.py", "tests/test_redis.py"),
    # the limiter's own asyncio client: how it reads replies (the Redis tests
    # that run it through the limiter are tests/test_redis.py's)
    "adapters/permits/adapters/_resp.py": ("properties/test_redis_state.py", "tests/test_resp.py"),
    # the script's properties, which run it at chosen times (tests/test_redis.py
    # runs it through the limiter, on the real clock)
    "adapters/permits/adapters/redis.lua": (
        "properties/test_redis_state.py",
        "properties/test_redis_gcra.py",
    ),
    "adapters/permits/httpx.py": ("tests/test_httpx.py",),
    "adapters/permits/aiohttp.py": ("tests/test_aiohttp.py",),
    "adapters/permits/_upstream.py": ("tests/test_httpx.py", "tests/test_aiohttp.py"),
    "adapters/permits/adapters/_metrics.py": (
        "tests/test_prometheus.py",
        "tests/test_opentelemetry.py",
    ),
    "adapters/permits/adapters/prometheus.py": ("tests/test_prometheus.py",),
    "adapters/permits/adapters/opentelemetry.py": ("tests/test_opentelemetry.py",),
    "adapters/permits/testing.py": ("tests/test_testing.py",),
    # the live run of a scenario (permits demo), held to the simulation
    "adapters/permits/cli/_live.py": ("tests/test_cli.py",),
    "adapters/permits/adapters/_recording.py": ("tests/test_adapters.py", "tests/test_trace.py"),
}

#: The module that reads a mutant's file that is no module (the Redis script,
#: read beside its module): imported from the copy, it reads the copy's file.
READ_BY = {"adapters/permits/adapters/redis.lua": "adapters/permits/adapters/redis.py"}

#: name -> (file under core/permits/core, ``sim/...`` under core/permits, or
#: ``adapters/permits/...`` from the repository; text to replace,
#: replacement, what it breaks)
MUTANTS: dict[str, tuple[str, str, str, str]] = {
    "skip-cancelled-check": (
        "_machine.py",
        "        self._withdraw(waiter)\n        counts[",
        "        counts[",
        "cancel counts the waiter but leaves it queued (the seed's naive limiter)",
    ),
    "cancel-keeps-the-plan": (
        "_machine.py",
        "            self._plan([])  # (the plan was made with it)\n",
        "            pass\n",
        "a cancel under costs leaves the plan made with the cancelled waiter in it (P4)",
    ),
    "serve-wrong-level": (
        "_policies.py",
        "            if depth:\n                return level\n        raise AssertionError(",
        "            if depth:\n                best = level\n        return best\n"
        "        raise AssertionError(",
        "strict priority serves the least urgent waiting level",
    ),
    "drop-share-counter": (
        "_policies.py",
        "owner = self._cycle[deal.position % len(self._cycle)]",
        "owner = self._cycle[0]",
        "shares always offer the first slot: the counter is gone",
    ),
    "drift-the-clock": (
        "_bucket.py",
        "        if k * self.P < (now - 1 - anchor) * self.Q:\n            self.anchor = now - 1",
        "        if True:\n            self.anchor = now - 1",
        "every charge restarts the schedule at now: rounding and lateness accumulate",
    ),
    "waits-at-most-of-level-0": (
        "_machine.py",
        "        return tuple(self._hists[level].at_most(bounds))\n",
        "        return tuple(self._hists[0].at_most(bounds))\n",
        "waits_at_most counts level 0's waits whatever level it is asked of (P17)",
    ),
    "aging-tie-by-level": (
        "_policies.py",
        "                key = (level * after + head.pushed_at, head.seq)\n",
        "                key = (level * after + head.pushed_at, level)\n",
        "aging breaks an exact tie of keys by level, not push order (P9, P13)",
    ),
    "flow-joins-at-zero": (
        "_queues.py",
        "        flow.start = flow.finish = self.clock\n",
        "        flow.start = flow.finish = 0\n",
        "a flow that joins starts at virtual time 0, not at its level's clock: it goes ahead of"
        " every head that waited (P35, P13)",
    ),
    "alone-synced-cancel-keeps-start": (
        "_queues.py",
        "        if head and flow.depth and (self.only is None or self.synced):\n",
        "        if head and flow.depth and self.only is None:\n",
        "a flow that another's cancel left alone keeps its cancelled head's start for the next"
        " head, and goes ahead of a flow that joins (P13, P34)",
    ),
    "spare-flow-keeps-its-key": (
        "_queues.py",
        "        flow.key = None  # kept as the spare, it keeps no trace of its key\n",
        "        pass\n",
        "the spare flow kept for the next to join holds on to the last key that left: a tenant's"
        " key object outlives its waiters (P37)",
    ),
    "emptied-level-keeps-its-scale": (
        "_queues.py",
        "            self.clock, self.scale, self.synced = 0, 1, True\n",
        "            self.clock, self.synced = 0, True\n",
        "a level that empties keeps the scale of the weights that waited before (P37)",
    ),
    "rescale-forgets-waiting-flows": (
        "_queues.py",
        "            flow.start *= factor\n            flow.finish *= factor\n",
        "            pass\n",
        "a new weight that changes a level's scale leaves its waiting flows' times at the old"
        " scale: a flow that joins after the clock moved loses its turn (P37, P13)",
    ),
    "snapshot-forgets-flowed": (
        "_machine.py",
        "            flowed=self._flowed,\n",
        "            flowed=False,\n",
        "a snapshot leaves out whether a push named a flow, which min_wait reads: machines with"
        " equal snapshots answer min_wait apart (P86)",
    ),
    "snapshot-forgets-pause-told": (
        "_machine.py",
        "            paused=(self._paused_at, self._paused_until),\n",
        "            paused=(None, self._paused_until),\n",
        "a supplied machine's snapshot leaves out when the last pause was told: machines with equal"
        " snapshots take a pause told in between apart (P86)",
    ),
    "shares-covered-head-waits": (
        "_policies.py",
        "            if need <= 0:\n",
        "            if need < 0:\n",
        "under shares with costs, a head whose level's credit covers its cost exactly is not"
        " served first: the deal goes past it (P13, P33)",
    ),
    "busiest-cut-at-n-by-grants": (
        "_machine.py",
        "        return tuple(r for r in rows if r.flow in kept)\n",
        "        return tuple(rows[:n])\n",
        "busiest_flows lists the n flows granted the most only: a tenant starved of grants with"
        " the longest backlog is left out (P50)",
    ),
    "copy-keeps-its-own-policy": (
        "_machine.py",
        "        shared: list[object] = [self._policy, self._flow_weights]\n",
        "        shared: list[object] = [self._flow_weights]\n",
        "copy.copy of a machine copies its policy object instead of sharing it (P98)",
    ),
    "copy-keeps-its-own-busiest-flows": (
        "_machine.py",
        "        for busiest in self._busiest:\n            shared += busiest.flows()\n",
        "",
        "copy.copy of a machine copies the flows its busiest-flow counters name, so a flow that"
        " hashes by identity is lost to the copy (P98)",
    ),
    "error-cuts-at-exactly-max-shown": (
        "_errors.py",
        "    if len(text) > MAX_SHOWN:\n",
        "    if len(text) >= MAX_SHOWN:\n",
        "a repr of exactly MAX_SHOWN characters is cut, not shown whole (P108)",
    ),
    "try-take-waiting-settle-later-unchecked": (
        "_machine.py",
        "            if settle_later.__class__ is not bool:\n"
        '                raise PermitTypeError("settle_later", settle_later, "a bool")\n',
        "",
        "try_take takes settle_later=1 while someone waits, where take refuses it (P101, P18)",
    ),
    "quota-over-at-once-kept": (
        "_bucket.py",
        "            if change.reset > now:\n",
        "            if change.reset >= now:\n",
        "a quota whose reset is now, over as it is given, is kept: with MAX_QUOTAS in force it is"
        " merged into the earliest, whose units left fall to its count (P32)",
    ),
    "quota-of-none-lets-one-through": (
        "_bucket.py",
        "if until > now and n > left]",
        "if until > now and n > left + 1]",
        "min_wait counts a quota as holding only a cost above its units left plus one: after a"
        " quota of none, a push of one unit is told it waits nothing (P32)",
    ),
    "aging-wrong-sign": (
        "_policies.py",
        "key = (level * after + head.pushed_at, head.seq)",
        "key = (level * after - head.pushed_at, head.seq)",
        "aging favours the newest waiter",
    ),
    "naive-refund": (
        "_machine.py",
        "        later = ledger.unlog(grant)\n"
        "        records = later if units is None else [grant._replace(cost=units), *later]\n"
        "        ledger.relog(records, source.replay(grant.before, records, now))"
        "  # type: ignore[arg-type]\n",
        "        source.k -= sum(grant.cost)\n        source._set_due()\n",
        "a refund just takes the cost off the schedule (the over-grant found earlier)",
    ),
    "deadline-off-by-one": (
        "_deadlines.py",
        "        past = (now + 1) << SHIFT",
        "        past = now << SHIFT",
        "a waiter is still served at its deadline",
    ),
    "lifo-within-level": (
        "_queues.py",
        "                last.append(waiter)",
        "                last.insert(0, waiter)",
        "a flow is served last in, first out (within a chunk)",
    ),
    "never-merge-right": (
        "_queues.py",
        "        elif i + 1 < len(chunks) and",
        "        elif False and",
        "a chunk thinned by cancels never merges into the next: chunks grow with the cancels",
    ),
    "keep-used-up-chunk": (
        "_queues.py",
        "        if start == len(chunk):\n            line._mend(0)  # used up",
        "        if start > len(chunk):\n            line._mend(0)  # used up",
        "a first chunk used up by grants is kept: the head is looked for past its end",
    ),
    "cancel-the-next-one": (
        "_queues.py",
        "del chunk[bisect_left(chunk, waiter.seq, key=_seq)]",
        "del chunk[bisect_right(chunk, waiter.seq, key=_seq) % len(chunk)]",
        "a cancel deletes the entry after its waiter's: the wrong waiter leaves",
    ),
    "cancel-in-the-chunk-before": (
        "_queues.py",
        "bisect_right(self.firsts, waiter.seq, 1) - 1",
        "max(0, bisect_left(self.firsts, waiter.seq, 1) - 1)",
        "a cancel of a chunk's first waiter looks for it in the chunk before",
    ),
    "deadlines-never-merge": (
        "_sorted.py",
        "        elif i + 1 < len(chunks) and len(chunk) + len(chunks[i + 1]) < CHUNK:\n"
        "            chunk += chunks.pop(i + 1)\n"
        "            del firsts[i + 1]\n"
        "            firsts[i] = chunk[0][0]\n"
        "        elif i > 0 and len(chunks[i - 1]) + len(chunk) < CHUNK:\n"
        "            chunks[i - 1] += chunks.pop(i)\n"
        "            del firsts[i]\n",
        "",
        "sorted chunks (deadlines, flow heads) thinned by departures never merge: they"
        " outnumber the entries",
    ),
    "remove-the-deadline-before": (
        "_sorted.py",
        "        del chunk[j]\n        if not chunk or",
        "        del chunk[j - 1]\n        if not chunk or",
        "a waiter that leaves deletes the sorted entry before its own (a deadline's, a flow"
        " head's)",
    ),
    "coarse-histogram": (
        "_stats.py",
        "_KEEP = [~((1 << max(0, n - _BITS)) - 1) for n in range(128)]\n",
        "_KEEP = [~((1 << max(0, n - _BITS + 1)) - 1) for n in range(128)]\n",
        "the histogram keeps one significant bit too few",
    ),
    "spend-keeps-refundable": (
        "_machine.py",
        "                ledger.add_spent(grant)\n            else:\n"
        "                ledger.forget(id)\n",
        "                ledger.add_spent(grant)\n",
        "a spent permit can still be refunded: its caller proceeded and the permit comes back",
    ),
    "spend-forgets-too-much": (
        "_ledger.py",
        "            head = log[0]\n",
        "            head = log[-1]\n",
        "spend forgets grants that a refund still has to replay",
    ),
    "in-flight-not-held": (
        "_bucket.py",
        "        excess = self.held + self.n - 1 - self.b1\n",
        "        excess = self.n - 1 - self.b1\n",
        "a permit in flight holds no place: the bucket refills under it (callers that resume"
        " late together exceed the limit)",
    ),
    "spend-charges-nothing": (
        "_machine.py",
        "        cost = waiter.cost\n        ledger = self._ledger\n",
        "        cost = (0,) * len(waiter.cost)\n        ledger = self._ledger\n",
        "a permit charged as its caller proceeds (in flight until then, or taken at once)"
        " is charged nothing",
    ),
    "spend-charges-one-unit": (
        "_bucket.py",
        "        self.held -= cost[self.index]\n"
        "        return self.charge(now, cost, mark, spent=True)\n",
        "        self.held -= cost[self.index]\n"
        "        return self.charge(now, tuple(min(c, 1) for c in cost), mark, spent=True)\n",
        "a permit in flight is charged one unit of each limit it takes from when spent, not"
        " its cost (the same as at the grant while every cost is one unit)",
    ),
    "charges-kept-without-window": (
        "_machine.py",
        "            elif ledger.window is not None:  # a charged grant is held\n",
        "            elif True:\n",
        "a machine without a settle window (None) still holds its charged grants (refused a"
        " refund, but kept for ever)",
    ),
    "quiet-push-replans": (
        "_machine.py",
        "                    self._deadlines.add(waiter, deadline)\n            return out\n",
        "                    self._deadlines.add(waiter, deadline)\n"
        "                self._source.want(tuple(2 * n for n in units))\n"
        "            return out\n",
        "a push that cannot be granted at once plans the next grant for twice its cost, not the"
        " head's: the next tick moves (P54)",
    ),
    "refund-keeps-the-place": (
        "_machine.py",
        "            self._flying -= 1\n            source.release(grant.cost)\n"
        "            if units is not None:",
        "            self._flying -= 1\n            if units is not None:",
        "a permit in flight that is refunded still holds its place in the bucket",
    ),
    "expire-with-a-free-permit": (
        "_machine.py",
        "        queues._append(waiter, weight)\n        if waiter.deadline is not None:\n",
        "        if late:\n"
        "            self._expired[level] += 1\n"
        "            out.append(_new(Decision, (id, _EXPIRED, level, now, 0)))\n"
        "            return out\n"
        "        queues._append(waiter, weight)\n        if waiter.deadline is not None:\n",
        "a deadline of now expires even with a permit free (timeout=0 never granted)",
    ),
    "reject-with-a-free-permit": (
        "_machine.py",
        "        queues._append(waiter, weight)\n        if waiter.deadline is not None:\n",
        "        if full and limit == 0:\n"
        "            self._rejected[level] += 1\n"
        "            out.append(_new(Decision, (id, _REJECTED, level, now, 0)))\n"
        "            return out\n"
        "        queues._append(waiter, weight)\n        if waiter.deadline is not None:\n",
        "max_waiting=0 rejects even on an idle machine",
    ),
    "push-again-keeps-refundable": (
        "_machine.py",
        "        self._ledger.forget(id)  # a new life: the old grant is no longer refundable\n",
        "",
        "a push again leaves the id's earlier grant refundable (rejected or not)",
    ),
    "burst-plus-one": (
        "_bucket.py",
        "        self.b1 = burst - 1",
        "        self.b1 = burst",
        "the bucket banks burst + 1 permits (the GCRA off-by-one)",
    ),
    "min-wait-optimistic": (
        "_bucket.py",
        "(self.b1 - k - n + 1) * self.P // self.Q",
        "(self.b1 - k - n + 2) * self.P // self.Q",
        "fail-fast admission promises one permit interval too little",
    ),
    "charge-one-limit": (
        "_bucket.py",
        "        for bucket in self.buckets:\n"
        "            marks.append(bucket.charge(now, cost, mark))\n",
        "        for bucket in self.buckets[:1]:\n"
        "            marks.append(bucket.charge(now, cost, mark))\n"
        "        for bucket in self.buckets[1:]:\n"
        "            marks.append((bucket.anchor, bucket.k, bucket.quotas))\n",
        "a grant charges its first limit and not the others",
    ),
    "small-passes-large": (
        "_machine.py",
        "                if now < source.due:\n                    return\n",
        "                if now < source.due:\n"
        "                    level = min(\n"
        "                        (lv for lv in range(self._levels) if depths[lv]),\n"
        "                        key=lambda lv: sum(queues.head(lv).cost),\n"
        "                    )\n"
        "                    source.want(queues.head(level).cost)\n"
        "                    if now < source.due:\n"
        "                        return\n",
        "a smaller head is granted while the chosen one waits for its units",
    ),
    "settle-wrong-direction": (
        "_machine.py",
        "[grant._replace(cost=units), *later]",
        "[grant._replace(cost=tuple(max(0, 2 * a - b) for a, b in zip(grant.cost, units))),"
        " *later]",
        "a settle below the cost charges more, and above it gives back",
    ),
    "settle-zeroes-the-unnamed": (
        "checks.py",
        "settled.get(i, units) for i, units in enumerate(asked)",
        "settled.get(i, 0) for i, units in enumerate(asked)",
        "a settle naming only tokens gives back the request it leaves out",
    ),
    "aging-by-the-served-head": (
        "_policies.py",
        "                head = queues.oldest(level)\n",
        "                head = queues.head(level)\n",
        "aging ranks a level by the call its flows serve next, not its oldest",
    ),
    "fifo-by-the-served-head": (
        "_policies.py",
        "queues.oldest(level).seq < queues.oldest(best).seq",
        "queues.head(level).seq < queues.head(best).seq",
        "FIFO ranks a level by the call its flows serve next, not its oldest",
    ),
    "oldest-is-the-served-head": (
        "_queues.py",
        "        return self.firsts.chunks[0][0][1]\n",
        "        return self.heads.chunks[0][0][1]\n",
        "a level's oldest waiter is taken to be the one its flows serve next",
    ),
    "forget-the-pause": (
        "_bucket.py",
        "        if until > self.until:\n",
        "        if False:\n",
        "a pause (429 Retry-After) is ignored",
    ),
    "adopt-raises": (
        "_bucket.py",
        "            if floor > tat:\n",
        "            if True:\n",
        "the upstream's word can raise what the bucket holds",
    ),
    "shares-count-grants": (
        "_policies.py",
        "        if queues.unit_costs:\n            owner",
        "        if True:\n            owner",
        "shares deal one slot per grant, whatever it costs: large costs take more units",
    ),
    "shares-keep-idle-credit": (
        "_policies.py",
        "deal.credits = tuple(c if depths[lv] else 0 for lv, c in enumerate(credits))",
        "deal.credits = tuple(credits)",
        "a level keeps the credit it was dealt after it stops waiting",
    ),
    "flows-ignore-weight": (
        "_queues.py",
        "return -(-scale // self.weight)",
        "return scale",
        "every flow weighs 1, whatever its weight",
    ),
    "flows-scale-unbounded": (
        "_queues.py",
        "        if scale > MAX_SCALE:\n            return\n",
        "",
        "a level's virtual-time scale grows with every new weight: ever larger numbers",
    ),
    "leaving-head-keeps-its-entry": (
        "_queues.py",
        "        if rehead:\n            self.heads.delete(flow.entry)  # at once",
        "        if rehead:\n            pass  # at once",
        "a flow's head that leaves ungranted (cancelled, expired) keeps its entry among the"
        " level's flow heads: a head gone is served, or a flow gone",
    ),
    "flows-serve-oldest": (
        "_queues.py",
        "flow.entry = (finish << SHIFT) + head.seq",
        "flow.entry = head.seq",
        "the flows of a level are served in push order: one tenant's backlog blocks the rest",
    ),
    "flow-clock-stuck": (
        "_queues.py",
        "self.clock = flow.finish = flow.start = flow.entry >> SHIFT",
        "flow.finish = flow.start = flow.entry >> SHIFT",
        "the level's virtual clock never moves: a flow that joins late jumps the queue",
    ),
    "flow-finish-backwards": (
        "_queues.py",
        "        finish = flow.start + head.cost[self.index] * flow.step(self.scale)\n",
        "        finish = flow.start - head.cost[self.index] * flow.step(self.scale)\n",
        "a flow head's virtual finish counts its cost backwards: the dearer, the sooner",
    ),
    "flows-kept-empty": (
        "_queues.py",
        "nothing of it is kept\n        del self.flows[flow.key]\n",
        "nothing of it is kept\n        return\n",
        "a flow without waiters is kept: memory grows with every key ever seen",
    ),
    "pause-time-overlaps": (
        "_machine.py",
        "self._paused_ns += until - max(now, end)",
        "self._paused_ns += until - now",
        "the time paused counts overlapping pauses twice",
    ),
    "pause-from-time-zero": (
        "_machine.py",
        "        self._paused_until = -NEVER\n",
        "        self._paused_until = 0\n",
        "pauses are counted from time 0: on a clock that reads negative times, none is",
    ),
    "take-past-waiters": (
        "_machine.py",
        "        if self._ids:\n"
        "            return out  # a permit is free only while nobody waits (P2)\n",
        "",
        "take grants a newcomer at once while others wait for their units",
    ),
    "take-uncounted": (
        "_machine.py",
        "        self._arrive(id, level, units, flow)\n        waiter = _new(",
        "        waiter = _new(",
        "a permit taken at once is not counted as pushed, nor its cost as varied",
    ),
    "take-at-once-uncounted": (
        "_machine.py",
        "        self._pushed[level] += 1\n        self._queues._pass(level)\n",
        "        self._queues._pass(level)\n",
        "a permit found free by the hot case of take is not counted as pushed",
    ),
    "take-at-once-wait-unrecorded": (
        "_machine.py",
        "        elif self._hists is not None:  # (_granted's one step that does something here)\n"
        "            self._hists[level]._add(0)\n",
        "",
        "a permit found free by the hot case of take is not counted in its level's waits",
    ),
    "try-take-ticks-past-waiters": (
        "_machine.py",
        "        if self._ids:\n            self._arrival(id, level, now, None, cost, flow)",
        "        if False:\n            self._arrival(id, level, now, None, cost, flow)",
        "try_take ticks while someone waits: the waiters it decides are told to nobody",
    ),
    "take-at-once-unweighed": (
        "_machine.py",
        "            and self._flow_weights is None\n",
        "",
        "the hot case of take skips the flow weights: a weight function's refusal is not heard",
    ),
    "take-at-once-keeps-the-log": (
        "_machine.py",
        "        source.charge(now, self._unit, False)\n        self._ledger.trim()\n",
        "        source.charge(now, self._unit, False)\n",
        "the hot case of take leaves grants in the log that no refund can reach",
    ),
    "rerate-refills": (
        "_bucket.py",
        "max(Fraction(now - 1), now + (self.b1 + 1 - units) * change.P / change.Q)",
        "Fraction(now - 1)",
        "a change of limit refills the bucket",
    ),
    "quota-uncounted": (
        "_bucket.py",
        "tuple((left - n, until) for",
        "tuple((left, until) for",
        "the upstream's quota is never used up: charges do not count against it",
    ),
    "supplied-first-limit": (
        "_bucket.py",
        "for n, (P, Q, b) in zip(cost, self.limits, strict=True)",
        "for n, (P, Q, b) in zip(cost[:1], self.limits, strict=False)",
        "a supplied machine's min_wait reads the first outside limit only",
    ),
    "owed-ignored": (
        "_machine.py",
        "            if owed is not None and depths[owed]:\n",
        "            if False:\n",
        "a permit owed to a level goes to the policy's choice instead",
    ),
    "owed-not-next": (
        "_machine.py",
        "        if owed is not None and self._queues.depths[owed]:\n            return owed\n",
        "",
        "next_level() names the policy's choice, not the level owed a permit",
    ),
    "too-long-at-equal": (
        "_machine.py",
        "self._least_wait(level, units, flow, now, out) > max_wait_ns:",
        "self._least_wait(level, units, flow, now, out) >= max_wait_ns:",
        "a push whose best case waits exactly its max_wait is refused as too long",
    ),
    "too-long-uncounted": (
        "_machine.py",
        "            self._too_long[level] += 1\n",
        "",
        "a push refused for its max_wait is not counted as too long",
    ),
    "supplied-too-long-at-equal": (
        "_machine.py",
        "        if wait_ns <= max_wait_ns:\n            return []",
        "        if wait_ns < max_wait_ns:\n            return []",
        "a waiter the source says waits exactly its max_wait leaves as too long",
    ),
    "supplied-too-long-as-cancelled": (
        "_machine.py",
        "self._leave(id, self._too_long)",
        "self._leave(id, self._cancelled)",
        "a waiter the source says waits past its max_wait is counted as cancelled",
    ),
    "busiest-first-limit": (
        "_machine.py",
        "self._busiest[level].add(flow, cost[self._queues.flow_limit])",
        "self._busiest[level].add(flow, cost[0])",
        "busiest_flows counts the units of the first limit, not of the flow limit",
    ),
    "no-waits-counts-the-newcomer": (
        "_machine.py",
        "            for other, granted in enumerate(self._units):\n"
        "                granted[:] = [n + self._granted_at(other) for n in granted]\n",
        "            self._pushed[level] += 1  # the newcomer, counted too soon\n"
        "            for other, granted in enumerate(self._units):\n"
        "                granted[:] = [n + self._granted_at(other) for n in granted]\n"
        "            self._pushed[level] -= 1\n",
        "the first push of another cost is counted while the grants so far are turned "
        "into units: a machine that keeps no waits takes it for granted",
    ),
    "no-waits-forgets-too-long": (
        "_machine.py",
        "            - self._expired[level]\n            - self._too_long[level]\n",
        "            - self._expired[level]\n",
        "a machine that keeps no waits counts a push refused as too long as granted",
    ),
    "paused-outside-uncounted": (
        "_machine.py",
        "        self._paused_at = now\n        self._count_pause(until, now)\n",
        "        self._paused_at = now\n",
        "a supplied machine does not count a pause its source outside tells it of",
    ),
    "refunded-outside-uncounted": (
        "_machine.py",
        '        self._check_granted("refunded", level, cost, asked)\n'
        "        self._refunded[level] += 1\n",
        '        self._check_granted("refunded", level, cost, asked)\n',
        "a supplied machine told of a permit given back to the source outside does not count it"
        " refunded (P20)",
    ),
    "refunded-outside-never-granted": (
        "_machine.py",
        '        self._check_granted("refunded", level, cost, asked)\n',
        "",
        "a supplied machine told of a permit it never granted given back counts it, and its"
        " statistics go negative (P18, P20)",
    ),
    "paused-told-back-in-time": (
        "_machine.py",
        "        if now < self._paused_at:\n"
        "            raise TimeWentBackwards(now, self._paused_at)\n",
        "",
        "a supplied machine counts a pause told at a now before an earlier pause's, and the"
        " union of the pauses comes out short (P46)",
    ),
    "zero-cost-held-by-a-debt": (
        "_bucket.py",
        "        if not self.n:\n            self.due = self.until\n            return\n",
        "",
        "a waiter that takes nothing of a limit waits for that limit's debt, word or quota (P96)",
    ),
    "cost-kept-past-a-lower-burst": (
        "_machine.py",
        "        self._asks.clear()  # read again",
        "        pass  # read again",
        "a cost dict asked for before a burst was lowered is not checked against the new burst",
    ),
    "above-includes-equal": (
        "_machine.py",
        "if w.cost[index] > units\n",
        "if w.cost[index] >= units\n",
        "waiting_above names a waiter whose cost equals the burst, which fits it",
    ),
    "snapshot-forgets-the-quotas": (
        "_machine.py",
        "b.held, b.until, b.quotas) for b in buckets)",
        "b.held, b.until) for b in buckets)",
        "snapshot() leaves out the upstream's quotas in force, on which decisions depend (P86)",
    ),
    "above-in-level-order": (
        "_machine.py",
        "        return sorted(above, key=lambda w: w.seq)\n",
        "        return above\n",
        "waiting_above gives the waiters level by level, not in push order",
    ),
    "settled-outside-backwards": (
        "_machine.py",
        "zip(asked, units, strict=True)",
        "zip(units, asked, strict=True)",
        "a supplied machine counts a settle made outside in the wrong direction",
    ),
    "settle-later-logged-twice": (
        "_ledger.py",
        "        if self.held.get(grant.waiter.id) is not grant:\n            self.add(grant)\n",
        "        self.add(grant)\n",
        "a permit charged at its grant and spent to settle later is logged a second time: its"
        " settle, or a later refund, replays the wrong records (P29)",
    ),
    "wait-total-is-the-max": (
        "_machine.py",
        '"wait_total_ns": None if hist is None else hist.total,',
        '"wait_total_ns": None if hist is None else hist.max,',
        "statistics() reports the longest wait as the sum of the waits (P17)",
    ),
    "settle-later-forgotten": (
        "_machine.py",
        "            if settle_later:\n                ledger.add_spent(grant)",
        "            if False:\n                ledger.add_spent(grant)",
        "a permit charged at its grant and spent with settle_later can no longer be settled (P29)",
    ),
    "replay-from-the-last-change": (
        "_bucket.py",
        "                self.P, self.Q, self.b1 = record.old  # the limit as it was at the mark\n"
        "                break",
        "                self.P, self.Q, self.b1 = record.old  # the limit as it was at the mark",
        "a refund or settle replays from the limit as it stood before the last of two changes,"
        " not the first (P30)",
    ),
    "shares-credit-the-first-limit": (
        "_policies.py",
        "        credits[level] -= waiter.cost[deal.limit]",
        "        credits[level] -= waiter.cost[0]",
        "Shares of a second limit use a grant's units of the first from its level's credit (P33)",
    ),
    "quota-merge-keeps-the-later-count": (
        "_bucket.py",
        "        kept[0:2] = [(kept[0][0], kept[1][1])]",
        "        kept[0:2] = [(kept[1][0], kept[1][1])]",
        "beyond MAX_QUOTAS, the two quotas that end first merge into the later one's count:"
        " more available than the first allowed (P52)",
    ),
    "sim-urgent-is-the-first-listed": (
        "sim/_compare.py",
        "        return min(self._came(), key=lambda w: w.level).name\n",
        "        return self._came()[0].name\n",
        "compare ranks by the workload listed first, not the most urgent level's (P61)",
    ),
    "sim-trace-last-workloads-options": (
        "sim/_trace.py",
        "        first.setdefault(workload.level, workload)\n",
        "        first[workload.level] = workload\n",
        "a replayed level's calls take its last workload's options, not its first's (P59)",
    ),
    "sim-tenant-median-the-upper": (
        "sim/_require.py",
        "                return granted > 0 and within >= (granted - 1) // 2 + 1\n",
        "                return granted > 0 and within >= granted // 2 + 1\n",
        "a median tenant p99 requirement is judged on the upper of the middle two (P60)",
    ),
    "sim-seconds-truncated": (
        "sim/_scenario.py",
        "    ns = round(_exact(argument, value) * SECOND)\n",
        "    ns = int(_exact(argument, value) * SECOND)\n",
        "a scenario's seconds are truncated to the nanosecond, not the nearest (P58)",
    ),
    "sim-seconds-exponent-one-past": (
        "sim/_scenario.py",
        "        if value and abs(value.adjusted()) > RATE_EXPONENT:",
        "        if value and abs(value.adjusted()) > RATE_EXPONENT + 1:",
        "a Decimal time of exponent 10,001 is taken, one past the bound (P106)",
    ),
    "sim-empty-flow-read-as-written": (
        "sim/_trace.py",
        '    return cell if cell.strip("\'") else cell[2:]\n',
        "    return cell\n",
        "a trace's cell '' (the empty-string flow, written so) reads back as the flow '' (P107)",
    ),
    "sim-float-seconds-binary": (
        "sim/_scenario.py",
        "        return Fraction(repr(value))\n",
        "        return Fraction(value)\n",
        "a float of seconds is read as its binary value, not the decimal it prints as: 2.5e-9 s"
        " is 3 ns, not 2 (P58)",
    ),
    "sim-counts-the-end": (
        "sim/_run.py",
        "    never = duration  # no event at or after the end counts\n",
        "    never = duration + 1  # no event at or after the end counts\n",
        "a run counts a grant due at its end, [0, seconds] not [0, seconds) (P58)",
    ),
    "sim-tenant-none-granted-all-within": (
        "sim/_require.py",
        "                    return granted > 0 and within == granted\n",
        "                    return within == granted\n",
        "a worst tenant p99 requirement is met when no tenant was granted at all (P60)",
    ),
    "sim-median-none-granted-met": (
        "sim/_require.py",
        "                return granted > 0 and within >= (granted - 1) // 2 + 1\n",
        "                return within >= (granted - 1) // 2 + 1\n",
        "a median tenant p99 requirement is met when no tenant was granted at all (P60)",
    ),
    "sim-scale-factor-unchecked": (
        "sim/_scenario.py",
        '        factor = check_rate(factor, "factor")',
        "        factor = Fraction(factor)",
        "Scenario.scaled's factor is not checked as a rate: a Decimal past 1e10000 hangs (P106)",
    ),
    "sim-timeout-before-give-up": (
        "sim/_run.py",
        "_GIVES_UP, _TIMES_OUT = 0, 1\n_LEAVES_AS = (State.CANCELLED, _EXPIRED)\n",
        "_GIVES_UP, _TIMES_OUT = 1, 0\n_LEAVES_AS = (_EXPIRED, State.CANCELLED)\n",
        "a timeout and a give-up at one instant count as expired, not cancelled (P59)",
    ),
    "sim-arrival-at-the-end": (
        "sim/_run.py",
        "        if t >= duration_ns:\n            return\n",
        "        if t > duration_ns:\n            return\n",
        "arrivals() gives an arrival at the run's end too (P58)",
    ),
    "sim-quantile-rank-floor": (
        "sim/_require.py",
        "    rank = max(1, math.ceil(q * offered))\n",
        "    rank = max(1, math.floor(q * offered))\n",
        "offered_quantile takes the rank floor(q * n), not the nearest rank ceil(q * n) (P60)",
    ),
    "sim-traced-tenants-unchecked": (
        "sim/_compare.py",
        "        elif calls is not None:  # the first run: the calls name the same tenants in",
        "        elif False:  # the first run: the calls name the same tenants in",
        "compare with calls judges a requirement on the tenants of a workload whose calls name "
        "none, every policy missing it, instead of refusing it (P99)",
    ),
    "aging-ahead-own-level": (
        "_policies.py",
        "        # Every waiter at this level or a more urgent one has a smaller key.\n"
        "        return sum(queues.depths[: level + 1])",
        "        # Every waiter at this level or a more urgent one has a smaller key.\n"
        "        return queues.depths[level]",
        "aging's ahead counts its own level only (a lower bound still): with after longer "
        "than any wait, its min_wait and refusals as too long are not strict priority's (P14)",
    ),
    "shares-costs-own-slots-taken": (
        "_policies.py",
        "        free = size - sum(self.weights[o] for o in waiting[1:])",
        "        free = size - sum(self.weights[o] for o in waiting)",
        "under costs, shares count the most urgent waiting level's own slots as taken: "
        "with one level no slot is free, and its first grant of another cost breaks (P14)",
    ),
    "shares-costs-ask-every-level": (
        "_policies.py",
        "        waiting = [level for level, depth in enumerate(depths) if depth]\n        needs",
        "        waiting = list(range(len(depths)))\n        needs",
        "under costs, shares read the head of every level, waiting or not: with a lower "
        "level that never waits, a choice breaks (P14)",
    ),
    "flow-cap-of-the-default-flow": (
        "_machine.py",
        "            full = queues.flow_depth(level, flow) >= self._per_flow",
        "            full = queues.flow_depth(level, None) >= self._per_flow",
        "max_waiting_per_flow counts the level's default flow, whatever flow the newcomer "
        "names: one named flow per level is not capped as the unnamed level is (P36)",
    ),
    # -- the adapters: each runs its area's tests (ADAPTER_TESTS) --
    "clock-runs-back": (
        "adapters/permits/adapters/_base.py",
        "        if now < self._last:\n            return self._last\n",
        "",
        "a framework's clock that runs back is handed to the machine as it reads: the machine"
        " refuses a time behind one it has seen",
    ),
    "block-level-one-past-the-last-unnamed": (
        "adapters/permits/adapters/_base.py",
        "            elif not 0 <= level < self._machine.levels:  # (said where it came from)\n",
        "            elif not 0 <= level <= self._machine.levels:  # (said where it came from)\n",
        "a level() block's level one past the last is left to the machine, which names no block"
        " (P67)",
    ),
    "outermost-level-block-wins": (
        "adapters/permits/adapters/_base.py",
        "        token = _LEVEL.set(self._value)\n",
        "        token = _LEVEL.set(self._value if _LEVEL.get() is None else _LEVEL.get())\n",
        "in nested level() blocks the outermost sets the level (P67)",
    ),
    "seconds-of-an-int-by-float": (
        "adapters/permits/adapters/_base.py",
        "    ns = seconds * SECOND\n",
        "    ns = seconds * 1e9\n",
        "an int of seconds is multiplied as a float: past 2**53 ns (about 104 days) it is no"
        " longer exact (10**10 + 1 s is 10000000000999999488 ns) (P80)",
    ),
    "granted-cancel-not-refunded": (
        "adapters/permits/adapters/_base.py",
        "            # Decided, but the caller never proceeded: hand the permit back.\n"
        "            self._refund(id)\n",
        "            pass\n",
        "a caller cancelled after its permit was decided, before it proceeded, keeps the permit"
        " (in flight for nobody): the next waiter does not get it",
    ),
    "queue-full-named-after-the-schedule-point": (
        "adapters/permits/adapters/_base.py",
        "                try:\n"
        "                    return self._outcome(id, decision, cost, flow, timeout, decision.at)\n"
        "                finally:\n"
        "                    await self._checkpoint()\n",
        "                await self._checkpoint()\n",
        "under trio, an acquire refused for a full queue makes its QueueFull after its schedule"
        " point: another tenant that joined there makes it blame the level's cap (P79)",
    ),
    "redis-given-back-counted-used": (
        "adapters/permits/adapters/redis.py",
        "        self._machine.refunded(waiter.decision.level,"
        " dict(zip(names, units, strict=True)))\n",
        "",
        "a permit a cancelled caller gives back to Redis is counted as used: its units granted,"
        " and not refunded (P20)",
    ),
    "cancel-left-queued": (
        "adapters/permits/adapters/_base.py",
        "                cancelled = self._machine.cancel(id)  # asks the policy when costs"
        " differ\n",
        "                cancelled = True\n",
        "a caller cancelled while waiting is not withdrawn from the machine: a permit is granted"
        " to nobody",
    ),
    "timeout-twice-as-long": (
        "adapters/permits/adapters/_base.py",
        "        deadline = None if patience is None else now + patience\n",
        "        deadline = None if patience is None else now + 2 * patience\n",
        "acquire(timeout=t) gives up at 2t, not t",
    ),
    "pause-ends-early": (
        "adapters/permits/adapters/_base.py",
        "            decisions = self._machine.pause_until(now + length, now)\n",
        "            decisions = self._machine.pause_until(now + length // 2, now)\n",
        "pause_for(s) (a 429's Retry-After) lets the waiters go after half of s",
    ),
    "pause-left-forgets-the-longer": (
        "adapters/permits/adapters/_base.py",
        "            self._pause_end = max(self._pause_end, now + length)\n",
        "            self._pause_end = now + length\n",
        "pause_left() after a later pause that ends sooner says the shorter pause, while the"
        " longer still holds every waiter",
    ),
    "pause-until-reads-the-clock-face": (
        "adapters/permits/adapters/_base.py",
        "    return max(when - datetime.now(timezone.utc), timedelta(0))",
        "    return max(when.replace(tzinfo=None) - datetime.utcnow(), timedelta(0))",
        "pause_until reads a moment's clock face as UTC: a Retry-After date given in another"
        " time zone pauses hours too long or not at all",
    ),
    "settle-window-dropped": (
        "adapters/permits/adapters/_base.py",
        "            decisions = machine.spend(id, now, settle_later=self._settle_later)\n",
        "            decisions = machine.spend(id, now, settle_later=False)\n",
        "a permit granted after a wait can no longer be settled once its caller proceeds, within"
        " the settle_window too",
    ),
    "spent-at-the-grant": (
        "adapters/permits/adapters/_base.py",
        "        return self._outcome(id, waiter.decision, cost, flow, timeout, self._now())\n",
        "        return self._outcome(id, waiter.decision, cost, flow, timeout,"
        " waiter.decision.at)\n",
        "a waiter's permit counts from its grant, not from when its caller resumes: callers a"
        " stall held resume together past the limit (P26)",
    ),
    "refund-not-replanned": (
        "adapters/permits/adapters/_base.py",
        "            self._interrupted(error)  # a broken policy\n"
        "            return True\n"
        "        self._reschedule()\n",
        "            self._interrupted(error)  # a broken policy\n            return True\n",
        "a permit handed back (its caller left before proceeding) does not re-plan the timer:"
        " a waiter it lets go sooner waits for the tick planned before",
    ),
    "asyncio-timer-never-moved": (
        "adapters/permits/adapters/asyncio.py",
        "        if when == self._handle_at and self._handle is not None:\n",
        "        if self._handle is not None:\n",
        "the loop's timer (asyncio; anyio under asyncio), once armed, is never moved: a permit"
        " due sooner (a raised rate, a"
        " cancel, a refund) waits for the tick planned before",
    ),
    "tasked-timer-never-earlier": (
        "adapters/permits/adapters/_tasked.py",
        "        if self._sleep_scope is not None:\n"
        "            self._sleep_scope.deadline = wake_at\n",
        "        if self._sleep_scope is not None and (\n"
        "            wake_at > self._sleep_scope.deadline"
        " or self._sleep_scope.deadline == math.inf\n"
        "        ):\n"
        "            self._sleep_scope.deadline = wake_at\n",
        "trio's and anyio's timer task, once armed, is moved later, never earlier: a permit due"
        " sooner (a raised rate, a cancel, a refund) waits for the tick planned before",
    ),
    "async-with-limiter-takes-a-permit": (
        "adapters/permits/adapters/_base.py",
        "        raise TypeError(\n"
        '            "`async with limiter:` takes no permit: write '
        '`async with limiter.permit(level):` "\n'
        '            "for one; open a limiter with `async with open_limiter(...) as limiter:`"\n'
        "        )\n",
        "        await self.acquire()  # type: ignore[attr-defined]\n",
        "`async with limiter:` takes a permit and enters (aiolimiter's idiom), where it is"
        " refused saying what to write (P62)",
    ),
    "body-exception-in-a-group": (
        "adapters/permits/adapters/_tasked.py",
        "            raised = error\n",
        "            raise\n",
        "a body's exception leaves trio's and anyio's `async with open_limiter(...)` wrapped in"
        " the timer's task group's ExceptionGroup, not as itself (P63)",
    ),
    "live-call-not-replanned": (
        "adapters/permits/adapters/_base.py",
        "        self._dispatch(decisions)\n        self._reschedule()\n\n    def _settle(",
        "        self._dispatch(decisions)\n\n    def _settle(",
        "set_limit, pause_for, adopt, quota and settle do not re-plan the timer: a permit they"
        " bring sooner waits for the tick planned before (P64)",
    ),
    "live-call-wakes-nobody": (
        "adapters/permits/adapters/_base.py",
        "        self._dispatch(decisions)\n        self._reschedule()\n\n    def _settle(",
        "        self._reschedule()\n\n    def _settle(",
        "set_limit, pause_for, adopt, quota and settle wake none of the callers whose permits"
        " they decided: those wait for nothing (P64)",
    ),
    "pause-left-reads-the-last-time": (
        "adapters/permits/adapters/_base.py",
        "        return max(0, self._pause_end - self._clock()) / SECOND\n",
        "        return max(0, self._pause_end - self._last) / SECOND\n",
        "pause_left() counts from the limiter's last call, not the clock's now: it does not run"
        " down between calls (P65)",
    ),
    "settle-refusal-not-named": (
        "adapters/permits/adapters/_base.py",
        '            raise NotRefundable(self, reason, argument="permit") from None\n',
        "            raise\n",
        "a settle refused is the core's NotRefundable, naming the limiter's private id and"
        " settle_window_ns, not the permit and settle_window (P66)",
    ),
    "settle-after-close-reaches-the-machine": (
        "adapters/permits/adapters/_base.py",
        "        if self._closed is not None:\n            raise self._refused()\n"
        "        now = self._now()\n        if not self._running:\n",
        "        now = self._now()\n        if not self._running:\n",
        "a permit settled (or a live call made) after its limiter closed is applied to the"
        " machine, not refused with LimiterClosed (P66)",
    ),
    "level-block-ignored": (
        "adapters/permits/adapters/_base.py",
        "            level = _LEVEL.get()\n            if level is None:\n"
        "                level = self.default_level\n",
        "            level = self.default_level\n",
        "an acquire that names no level asks at the limiter's default_level, not at the level of"
        " the level(n) block it runs in (P67)",
    ),
    "level-block-not-left": (
        "adapters/permits/adapters/_base.py",
        "        _LEVEL.reset(tokens[-1])\n",
        "        pass\n",
        "a level(n) block left keeps its level set: the acquires after it, outside it, ask at"
        " n (P67)",
    ),
    "max-wait-not-pushed": (
        "adapters/permits/adapters/_base.py",
        "id, level, now, deadline=deadline, cost=cost, flow=flow, max_wait_ns=limit",
        "id, level, now, deadline=deadline, cost=cost, flow=flow, max_wait_ns=None",
        "acquire(max_wait=...) after the first try waits however long, never refused as too"
        " long (P68)",
    ),
    "too-long-estimate-forgets-the-cost": (
        "adapters/permits/adapters/_base.py",
        "        wait = self._machine.min_wait(level, cost=cost, flow=flow)\n",
        "        wait = self._machine.min_wait(level, flow=flow)\n",
        "WouldWaitTooLong's estimate is the best case of one unit, not of the cost the refusal"
        " compared (P68)",
    ),
    "too-long-estimate-forgets-the-flow": (
        "adapters/permits/adapters/_base.py",
        "        wait = self._machine.min_wait(level, cost=cost, flow=flow)\n",
        "        wait = self._machine.min_wait(level, cost=cost)\n",
        "WouldWaitTooLong's estimate is the default flow's, not the flow the refusal compared"
        " (P68)",
    ),
    "pause-for-ever-breaks-the-limiter": (
        "adapters/permits/adapters/_base.py",
        '        length = _finite_nanoseconds("seconds", seconds)\n\n        def pause(',
        '        length = _nanoseconds("seconds", seconds)\n\n        def pause(',
        "pause_for(math.inf) is not refused by name: the machine's pause_until is handed None"
        " and its TypeError closes the limiter (P69)",
    ),
    "reset-after-ever-breaks-the-limiter": (
        "adapters/permits/adapters/_base.py",
        '        after = _finite_nanoseconds("reset_after", reset_after)\n',
        '        after = _nanoseconds("reset_after", reset_after)\n',
        "adopt or quota with reset_after=math.inf is not refused by name: the machine is handed"
        " None and its TypeError closes the limiter (P69)",
    ),
    "trio-cancel-after-wake-unseen": (
        "adapters/permits/adapters/trio.py",
        "    _cancel_after_wake = True\n",
        "    _cancel_after_wake = False\n",
        "a trio waiter cancelled after its permit was decided proceeds with it (the cancel"
        " lands at its next checkpoint): the permit is spent for a cancelled caller",
    ),
    "anyio-cancel-after-wake-unseen": (
        "adapters/permits/adapters/anyio.py",
        "    _cancel_after_wake = True\n",
        "    _cancel_after_wake = False\n",
        "an anyio waiter cancelled after its permit was decided proceeds with it (the cancel"
        " lands at its next checkpoint): the permit is spent for a cancelled caller",
    ),
    "threads-timer-not-woken": (
        "adapters/permits/adapters/threads.py",
        "        if self._machine.next_tick() != self._timer_at:\n"
        "            self._plan.notify()\n",
        "        if self._timer_at is None:\n            self._plan.notify()\n",
        "the thread adapter's timer thread, once asleep until a tick, is not woken when the plan"
        " changes: a permit due sooner (a raised rate, a cancel, a refund) waits for that tick",
    ),
    "threads-interrupt-not-withdrawn": (
        "adapters/permits/adapters/threads.py",
        "            if pushed and error is not waiter.error:\n",
        "            if False:\n",
        "a thread interrupted while waiting (KeyboardInterrupt) stays queued: its permit is"
        " granted to nobody",
    ),
    "threads-fork-keeps-in-flight": (
        "adapters/permits/adapters/threads.py",
        "            if grant.before is None:  # in flight: charged only when spent\n",
        "            if False:\n",
        "in a child made by os.fork, the permits in flight for the parent's threads are kept"
        " (never spent there): the child's limiter holds them for ever",
    ),
    "redis-hand-over-during-pause": (
        "adapters/permits/adapters/redis.py",
        "            and self._last >= self._pause_end\n",
        "",
        "a Redis permit whose caller left is handed to the next waiter during this process's"
        " pause (a 429's Retry-After), not given back to the shared bucket",
    ),
    "redis-refund-not-sent": (
        "adapters/permits/adapters/redis.py",
        "        self._pending.append((self._limit.ask_charge(tuple(-n for n in units)), 1,"
        " True))\n",
        "",
        "a Redis permit whose caller left before proceeding, and no local waiter takes over, is"
        " not given back to the shared bucket",
    ),
    "redis-settle-twice": (
        "adapters/permits/adapters/redis.py",
        "        del self._settleable[id]\n",
        "",
        "a Redis permit may be settled twice: the shared bucket is charged, or given back, twice",
    ),
    "redis-garbage-read-as-a-full-bucket": (
        "adapters/permits/adapters/redis.lua",
        "  tat[i] = max(now, state[i + 1] and number(state[i + 1], fields[i + 1]) or now)\n",
        "  tat[i] = max(now, tonumber(state[i + 1]) or now)\n",
        "the script reads a bucket's time that something else overwrote with no number as"
        " absent (a full bucket) where it takes its general steps (several limits, a pause),"
        " where the plain take fails",
    ),
    "redis-infinity-read-as-a-number": (
        "adapters/permits/adapters/redis.lua",
        "  if not (v and v >= -9007199254740992 and v <= 9007199254740992) then\n",
        "  if not v then\n",
        "the script reads a field that holds inf, nan or 1e300 as a number: its answers are"
        " nonsense (a wait of -2^63), not a failure",
    ),
    "redis-script-failure-unexplained": (
        "adapters/permits/adapters/redis.py",
        '    if key is not None and (text.startswith("WRONGTYPE") or "user_script:" in text):\n',
        '    if key is not None and text.startswith("WRONGTYPE"):\n',
        "the script failing on a field something else wrote is reported in Redis's words only,"
        " naming neither the limit's keys nor what to do",
    ),
    "redis-expiry-forgets-the-pause": (
        "adapters/permits/adapters/redis.lua",
        "  local args, last, over = {}, pause, nil",
        "  local args, last, over = {}, now, nil",
        "the state's expiry counts its buckets and quotas, not its pause: a pause longer than"
        " the buckets' refill is deleted with the state, or expires, before it ends",
    ),
    "redis-expiry-lengthened-every-take": (
        "adapters/permits/adapters/redis.lua",
        "      if redis.call('PTTL', KEYS[1]) < keep then"
        " redis.call('PEXPIRE', KEYS[1], keep + 1000) end\n    else\n",
        "      redis.call('PEXPIRE', KEYS[1], keep + 1000)\n    else\n",
        "the plain take sets the state's expiry at every call, long enough or not (PEXPIRE costs"
        " Redis three times PTTL)",
    ),
    "redis-empty-hash-tag-opened": (
        "adapters/permits/adapters/redis.py",
        '        if _hash_tag(self.key) == self.key:  # "{}"',
        '        if False:  # "{}"',
        "a limit whose keys' hash tag is empty ('{}' in the prefix) is opened: on a Redis"
        " Cluster its keys fall in different slots, and its script calls fail",
    ),
    "redis-hash-tag-from-the-first-brace": (
        "adapters/permits/adapters/redis.py",
        '    end = key.find("}", start + 1)\n',
        '    end = key.find("}")\n',
        "the hash tag is read up to the key's first '}', not the first after its first '{':"
        " a prefix with a '}' before the name's tag is refused, though Redis would hash the"
        " keys to one slot",
    ),
    "redis-noreplicas-closes": (
        "adapters/permits/adapters/redis.py",
        '_NOT_NOW = ("BUSY ", "MISCONF ", "NOREPLICAS ")',
        '_NOT_NOW = ("BUSY ", "MISCONF ")',
        "a server refusing writes while too few replicas are in sync (-NOREPLICAS) closes the"
        " limiter for good, where it is an outage the limiter waits out or serves locally",
    ),
    "resp-oom-a-plain-error": (
        "adapters/permits/adapters/_resp.py",
        '    "OOM": redis.exceptions.OutOfMemoryError,\n',
        "",
        "the limiter's own client reads a server out of memory (-OOM) as a plain error reply,"
        " a fault that closes the limiter, where redis-py's client reads it as an outage",
    ),
    "redis-unauthenticated-a-fault": (
        "adapters/permits/adapters/redis.py",
        '    if text.removeprefix("ERR ").startswith(_UNAUTHENTICATED):\n',
        '    if text.removeprefix("ERR ").startswith(_UNAUTHENTICATED + "never"):\n',
        "a take refused for want of a password the URL does not give (-ERR Protocol error:"
        " unauthenticated, which the limiter's own client is told) counts as a fault that"
        " closes the limiter, where -NOAUTH, which redis-py's client is told, is an outage",
    ),
    "redis-no-resp-a-fault": (
        "adapters/permits/adapters/redis.py",
        "    redis.exceptions.InvalidResponse,\n",
        "",
        "a reply that is no RESP (a web server on the URL's port) closes the limiter under"
        " redis-py's client, where the limiter's own client counts it as an outage",
    ),
    "redis-word-beyond-lua-numbers": (
        "adapters/permits/adapters/redis.py",
        '        word[index] = min(check_int("remaining", remaining, 0), _MOST_UNITS)\n',
        '        word[index] = check_int("remaining", remaining, 0)\n',
        "the upstream's word or quota of more than 2**53 units is sent as given: the script,"
        " counting in Lua numbers, stores 2**63 as -2**63, a quota that refuses every take",
    ),
    "redis-demand-expiry-in-seconds": (
        "adapters/permits/adapters/redis.lua",
        "    local keep = ceil(ttl / 1000) + @SLACK@\n",
        "    local keep = ceil(ttl / 1000000) + @SLACK@\n",
        "the demand hash's expiry is written in seconds where PEXPIRE reads milliseconds: it"
        " expires long before the demand it holds, and global priority forgets the waiters",
    ),
    "redis-demand-expiry-cut-by-a-shorter-demand": (
        "adapters/permits/adapters/redis.lua",
        "    if redis.call('PTTL', KEYS[4]) < keep then redis.call('PEXPIRE', KEYS[4], keep) end\n",
        "    redis.call('PEXPIRE', KEYS[4], keep)\n",
        "every demand written sets the demand hash's expiry, a later, shorter one cutting it"
        " short: another process's longer demand is lost before its time to live",
    ),
    "redis-line-expiry-rounded-down": (
        "adapters/permits/adapters/redis.lua",
        "    redis.call('PEXPIRE', KEYS[5], ceil((latest - now + grace) / 1000) + @SLACK@)\n",
        "    redis.call('PEXPIRE', KEYS[5], floor((latest - now + grace) / 1000) + @SLACK@)\n",
        "the line's expiry is its latest turn plus the grace rounded down to the millisecond:"
        " the line may expire before its latest turn is the grace past",
    ),
    "redis-quota-given-twice-dropped": (
        "adapters/permits/adapters/redis.lua",
        "(o[1] < q[1] or o[2] > q[2] or k < j)",
        "true",
        "the upstream's same quota given twice is dropped altogether, not kept once: takes are"
        " let through beyond its count until its end",
    ),
    "redis-lease-counts-its-first-permit-against-the-quota": (
        "adapters/permits/adapters/redis.lua",
        "        for _, q in ipairs(quotas[i]) do q[1] = q[1] - x[i] end  -- the quotas' units\n",
        "        if taken == 0 then for _, q in ipairs(quotas[i]) do q[1] = q[1] - x[i] end end\n",
        "a lease counts only its first permit against the upstream's quota: a lease of 3 under"
        " a quota of 2 takes 3",
    ),
    "redis-lease-leaves-half-the-burst-not-the-reserve": (
        "adapters/permits/adapters/redis.lua",
        "      if headroom then keep = max(reserve, floor(burst[i] / 2)) end\n",
        "      if headroom then keep = floor(burst[i] / 2) end\n",
        "a lease's extra permits leave half the burst but not the reserve: under a reserve"
        " above half the burst a lease takes into it",
    ),
    "redis-lease-publishes-one-granted": (
        "adapters/permits/adapters/redis.lua",
        "    counts[level + 1] = max(0, counts[level + 1] - taken)\n",
        "    counts[level + 1] = max(0, counts[level + 1] - 1)\n",
        "a lease publishes its process's waiters less one, not less every permit it took: its"
        " waiters served still hold up other processes' less urgent takes",
    ),
    "redis-fraction-truncated-where-stored": (
        "adapters/permits/adapters/redis.lua",
        "field, string.format(tat % 1 == 0 and '%d' or '%.17g', tat))",
        "field, string.format('%d', tat))",
        "the plain take stores a bucket's time to the whole microsecond below: at a fractional"
        " interval (3 a second) a take is let through a fraction of a microsecond early",
    ),
    "redis-fraction-truncated-by-the-general-steps": (
        "adapters/permits/adapters/redis.lua",
        "    args[2 * i] = string.format(tat[i] % 1 == 0 and '%d' or '%.17g', tat[i])\n",
        "    args[2 * i] = string.format('%d', tat[i])\n",
        "the script's general steps (several limits, a lease, the line) store a bucket's time to"
        " the whole microsecond below: at a fractional interval a take is let through early",
    ),
    "redis-line-expires-with-its-last-writer": (
        "adapters/permits/adapters/redis.lua",
        "    redis.call('PEXPIRE', KEYS[5], ceil((latest - now + grace) / 1000) + @SLACK@)\n",
        "    redis.call('PEXPIRE', KEYS[5], ceil((at - now + grace) / 1000) + @SLACK@)\n",
        "the line expires with the turn it was last told, not the latest it holds: the others'"
        " places are lost with it",
    ),
    "redis-settle-uncounted": (
        "adapters/permits/adapters/redis.py",
        "        self._machine.settled(\n",
        "        (lambda *_: None)(\n",
        "a settle on the shared limit changes the shared key but not the process's statistics:"
        " its level's units_granted keeps the units asked, not those settled",
    ),
    "redis-line-left-only-after-a-wait": (
        "adapters/permits/adapters/redis.py",
        "                and (answer.retry_after_us > 0 or take.depths is not None)\n",
        "                and answer.retry_after_us > 0\n",
        "under global priority, a process told a turn for now as it is served keeps its place in"
        " the line after its last waiter is served, until that turn is demand_ttl past",
    ),
    "redis-fallback-starts-full": (
        "adapters/permits/adapters/redis.py",
        '        for i in range(burst):\n            pacer.push(("drain", i), 0, now)\n',
        "",
        "the local fallback's bucket starts full, not empty: as Redis goes away, each process"
        " lets a burst of its share through at once, on top of what Redis granted",
    ),
    "redis-word-counted-from-when-sent": (
        "adapters/permits/adapters/redis.py",
        "            if now == given:\n                return first\n",
        "            return first\n",
        "the upstream's word or quota given while Redis does not answer is sent, when it answers"
        " again, as if given then: its reset counted from then, it holds back for longer",
    ),
    "redis-fallback-burst-as-the-float-product": (
        "adapters/permits/adapters/redis.py",
        "max(1, math.floor(first.burst * share))",
        "max(1, math.floor(first.burst * self.share))",
        "the local fallback's burst is the float product of the share and the burst, rounded"
        " down: 0.29 of 100 is 28.999999999999996, so 28, where the share's decimal makes 29",
    ),
    "redis-word-late-by-the-float-product": (
        "adapters/permits/adapters/redis.py",
        "            left = round(reset_after * SECOND) - round(ago * SECOND)\n"
        "            reset = -(-left // 1000)\n",
        "            reset -= math.floor(ago * 1e6)\n",
        "the time since the upstream's word was given, sent late, is the float product"
        " ago * 1e6 rounded down: 249 us is 248, and the reset counted a microsecond late",
    ),
    "redis-word-left-rounded-down": (
        "adapters/permits/adapters/redis.py",
        "            reset = -(-left // 1000)\n",
        "            reset = left // 1000\n",
        "the time left until the upstream's reset, sent late, is rounded down to the"
        " microsecond, not up as a whole reset is: the reset is counted a microsecond early",
    ),
    "redis-seconds-as-the-float-product": (
        "adapters/permits/adapters/redis.py",
        "    return -(-ns // 1000)\n",
        "    return math.ceil(seconds * 1e6)\n",
        "a duration in seconds is sent to the script as the float product seconds * 1e6 rounded"
        " up, not as its nanoseconds rounded up: a pause of 1.1 s lasts 1,100,001 us in Redis",
    ),
    "redis-horizon-as-the-float-product": (
        "adapters/permits/adapters/redis.py",
        "            book_us = round(book_ahead * SECOND) // 1000\n",
        "            book_us = math.floor(book_ahead * 1e6)\n",
        "a take's horizon is sent to the script as the float product book_ahead * 1e6 rounded down,"
        " not as its nanoseconds rounded down: 1.001 s is 1,000,999 us, and a take the buckets"
        " allow in exactly 1.001 s is refused",
    ),
    "redis-lost-state-above-full": (
        "adapters/permits/adapters/redis.lua",
        "    if tat < now then tat = now end\n",
        "    if state[2] and tat < now then tat = now end\n"
        "    if not state[2] then tat = now - T end\n",
        "the plain take reads a lost state (a restart, a FLUSHDB, an eviction) as a bucket one"
        " unit above full: a restart lets one permit more through than a full burst",
    ),
    "redis-duration-beyond-1e9-s-taken": (
        "adapters/permits/adapters/redis.py",
        "    if ns is None or seconds > _LONGEST_S or (above_zero and not ns):\n",
        "    if ns is None or seconds > 2 * _LONGEST_S or (above_zero and not ns):\n",
        "a pause, the upstream's reset or a demand_ttl of up to 2e9 s is taken and sent, past"
        " the 1e9 s the script's times are kept within",
    ),
    "redis-demand-ttl-as-the-float-product": (
        "adapters/permits/adapters/redis.py",
        "        return [self.process, -(-round(ttl * SECOND) // 1000), level, counts]\n",
        "        return [self.process, math.ceil(ttl * 1e6), level, counts]\n",
        "a demand_ttl reaches the script as the float product ttl * 1e6 rounded up, not as its"
        " nanoseconds rounded up: a demand of 999999999.999999 s lives 0.05 us short",
    ),
    "redis-burst-beyond-lua-numbers-sent": (
        "adapters/permits/adapters/redis.py",
        "        if new_burst > _MOST_UNITS:  # (kept in Redis, read by every process)\n",
        "        if new_burst > _MOST_UNITS and rate is not None:  # (kept in Redis)\n",
        "a change of limit to a burst above 2**53, given alone, is sent: the script refuses it"
        " by the rate Redis holds, a fault that closes the limiter",
    ),
    "redis-settle-debt-in-units": (
        "adapters/permits/adapters/redis.py",
        "            if n * interval > _LONGEST_REFILL_US:\n",
        "            if n > _LONGEST_REFILL_US:\n",
        "a settle's units more are bounded by 1e15 units, not by 1e9 s of them at the limit's"
        " rate: a debt of centuries is sent, and the script's times past 2**53 break the limit",
    ),
    "redis-quota-field-emptied-read-as-none": (
        "adapters/permits/adapters/redis.lua",
        "      if #words == 0 or #words % 2 == 1 then",
        "      if false then",
        "a quota field something else emptied (or left one number) is read as no quota in force,"
        " not as a key overwritten: the upstream's word is forgotten",
    ),
    "redis-debt-unbounded": (
        "adapters/permits/adapters/redis.lua",
        "    tat[i] = min(tat[i], now + 2e15)\n",
        "",
        "a bucket's time is stored however far past now settles add up to: about eight of 1e9 s"
        " each put it past 2**53 us, and every take of the limit fails until its keys are deleted",
    ),
    "redis-debt-bounded-on-the-first-limit-only": (
        "adapters/permits/adapters/redis.lua",
        "    tat[i] = min(tat[i], now + 2e15)\n",
        "    if i == 1 then tat[i] = min(tat[i], now + 2e15) end\n",
        "only the first limit's bucket time is held at 2e9 s past now: settles on a second limit"
        " put it past 2**53 us, and every take of the limit fails until its keys are deleted",
    ),
    "redis-debt-bounded-at-1e9-s": (
        "adapters/permits/adapters/redis.lua",
        "    tat[i] = min(tat[i], now + 2e15)\n",
        "    tat[i] = min(tat[i], now + 1e15)\n",
        "a bucket's time is kept at most 1e9 s past now, not 2e9 s: the upstream's word of a reset"
        " 1e9 s away with nothing left, and the debt of two settles, are cut short",
    ),
    "redis-turn-unbounded": (
        "adapters/permits/adapters/redis.lua",
        "    at = min(at + ahead * step, now + 2e15)\n",
        "    at = at + ahead * step\n",
        "a turn in the line is stored however far past now the steps of the processes ahead put"
        " it: at 1e9 s a unit, about eight ahead put it past 2**53 us, and its process's next take"
        " fails until the keys are deleted",
    ),
    "redis-turn-bounded-at-1e9-s": (
        "adapters/permits/adapters/redis.lua",
        "    at = min(at + ahead * step, now + 2e15)\n",
        "    at = min(at + ahead * step, now + 1e15)\n",
        "a turn in the line is kept at most 1e9 s past now, not 2e9 s: a process is told to ask"
        " sooner than the buckets and the line could let it through",
    ),
    "redis-line-stepped-by-the-slowest-limit": (
        "adapters/permits/adapters/redis.lua",
        "        if last == nil or held > last or (held == last and x[i] * T[i] > step) then\n",
        "        if x[i] * T[i] > step then\n",
        "the line spaces the processes by the slowest limit's step, not that of the limit that"
        " holds the take back: a day's quota beside a rate a second told turns hours apart",
    ),
    "redis-line-step-ignores-the-reserve": (
        "adapters/permits/adapters/redis.lua",
        "        local held = tat[i] - (burst[i] - min(x[i] + arg, burst[i])) * T[i]\n",
        "        local held = tat[i] - (burst[i] - min(x[i], burst[i])) * T[i]\n",
        "the limit that holds a take back is judged without the level's reserve: the line is"
        " stepped by a faster limit's interval while a slower one holds the take",
    ),
    "redis-shares-never-renormalised": (
        "adapters/permits/adapters/redis.lua",
        "      if begin + grant <= 4503599627370496 then\n",
        "      if true then\n",
        "global shares' virtual times grow without end under unbroken load: past 2**53 (about"
        " 104 days of one level taking a million units a second, weights 1000 and 999) every"
        " take fails reading them until the keys expire or are deleted",
    ),
    "redis-shares-renormalised-by-the-finish": (
        "adapters/permits/adapters/redis.lua",
        "          tags[j] = j == level + 2 and grant or max(0, (tags[j] or 0) - begin)\n",
        "          tags[j] = j == level + 2 and grant or max(0, (tags[j] or 0) - begin - grant)\n",
        "global shares' virtual times are brought down by the grant's finish, not its start:"
        " the level just granted starts as soon as the others, and gets more than its share",
    ),
    "redis-shares-renormalised-inexactly": (
        "adapters/permits/adapters/redis.lua",
        "          tags[j] = j == level + 2 and grant or max(0, (tags[j] or 0) - begin)\n",
        "          tags[j] = j == level + 2 and begin + grant - begin"
        " or max(0, (tags[j] or 0) - begin)\n",
        "global shares' virtual times are brought down after the grant's finish is added: a"
        " finish past 2**53, rounded to an even number, comes down one off",
    ),
    "redis-lcm-take-judged-by-the-first-limit": (
        "adapters/permits/adapters/redis.py",
        "            burst = list(self.limits.values())[shared].burst\n",
        "            burst = list(self.limits.values())[0].burst\n",
        "a take's weights are judged at the first limit's burst, not the shared limit's: beside"
        " a first limit of burst 1, weights a grant of the shared burst moves past 2**52 are sent",
    ),
    "redis-lcm-policy-judged-by-the-first-limit": (
        "adapters/permits/adapters/redis.py",
        "            burst = list(limit.limits.values())[dealt[1]].burst\n",
        "            burst = list(limit.limits.values())[0].burst\n",
        "a limiter's policy dealing units across processes is judged at the first limit's"
        " burst, not the shared limit's: weights too large for the shared burst are taken",
    ),
    "redis-lcm-raise-of-the-first-limit-judged": (
        "adapters/permits/adapters/redis.py",
        "            and name == list(self.limits)[self._shared]\n",
        "            and name == list(self.limits)[0]\n",
        "a change of limit is judged against the weights when it raises the first limit's burst,"
        " not the shared limit's: the shared burst is raised past what the weights allow",
    ),
    "redis-lcm-bound-by-the-largest-weight": (
        "adapters/permits/adapters/redis.py",
        "    cost = whole // min(weights)\n",
        "    cost = whole // max(weights)\n",
        "weights are judged by the cost of a unit at the largest weight, not the smallest: a"
        " grant of the burst at the level of the smallest moves its finish past 2**52 (weights"
        " with an lcm of 6.1e17 stored a finish past 2**53 at the first grant, and every take"
        " after it failed)",
    ),
    "redis-lcm-burst-raised-unchecked": (
        "adapters/permits/adapters/redis.py",
        '            _check_virtual_costs("burst", burst, self._weights, burst)\n',
        "            pass\n",
        "a change of limit that raises the shared burst is not judged against the weights: one"
        " grant of the new burst moves a level's finish past 2**52",
    ),
    "retry-after-local-time": (
        "adapters/permits/_upstream.py",
        "        date = date.replace(tzinfo=timezone.utc)\n",
        "        date = date.astimezone()\n",
        "a Retry-After HTTP date without a zone (asctime's form, -0000) is read in local time,"
        " not UTC",
    ),
    "should-retry-ignored": (
        "adapters/permits/_upstream.py",
        "        if _said_no_retry(headers):\n            return False\n",
        "",
        "a 429 or 503 whose x-should-retry says false is sent again while retries allow",
    ),
    "throttled-counts-503": (
        "adapters/permits/_upstream.py",
        "        if status == 429:\n",
        "        if status in THROTTLED:\n",
        "Upstream.throttled counts a 503 as a 429 (the limit exceeded), not only the 429s",
    ),
    "negative-left-is-garbage": (
        "adapters/permits/_upstream.py",
        '    if text.startswith("-") and text[1:].isascii() and text[1:].isdigit():\n'
        "        return 0\n",
        '    if text.startswith("-") and text[1:].isascii() and text[1:].isdigit():\n'
        "        return None\n",
        "a remaining count below 0 (Azure OpenAI's, once oversubscribed) is ignored as garbage,"
        " not read as none left",
    ),
    "retry-after-not-cut": (
        "adapters/permits/_upstream.py",
        "            if seconds > self.max_pause:\n"
        '                log.warning("Retry-After of %s s cut',
        '            if False:\n                log.warning("Retry-After of %s s cut',
        "a Retry-After past max_pause pauses the limiter that long, not max_pause",
    ),
    "retries-one-short": (
        "adapters/permits/_upstream.py",
        "    if paused is None or attempt >= retries:\n",
        "    if paused is None or attempt + 1 >= retries:\n",
        "an HTTP integration sends a throttled request again retries - 1 times, not retries",
    ),
    "malformed-retry-after-fatal": (
        "adapters/permits/_upstream.py",
        "    except (TypeError, ValueError, IndexError, OverflowError):\n        return None\n",
        "    except (TypeError, IndexError, OverflowError):\n        return None\n",
        "a Retry-After that is neither seconds nor a date raises out of the response's reading:"
        " the response is lost",
    ),
    "cautious-reads-the-most-left": (
        "adapters/permits/_upstream.py",
        "        left = _cautious(remaining, _left, min)\n",
        "        left = _cautious(remaining, _left, max)\n",
        "a remaining header sent on several lines (a proxy's and the upstream's) is read as the"
        " most left, not the least",
    ),
    "httpx-retry-waits-out-the-timeout": (
        "adapters/permits/httpx.py",
        "                    permit = await self.limiter.acquire(**asked,"
        " max_wait=options.timeout)\n",
        "                    permit = await self.limiter.acquire(**asked)\n",
        "httpx's async transport waits out its timeout for a retry's permit that cannot come"
        " within it, where it returns the throttled response at once (refused as too long)",
    ),
    "aiohttp-retry-waits-out-the-timeout": (
        "adapters/permits/aiohttp.py",
        "                    max_wait=None if kept is None else self.timeout,\n",
        "                    max_wait=None,\n",
        "aiohttp's middleware waits out its timeout for a retry's permit that cannot come"
        " within it, where it returns the throttled response at once (refused as too long)",
    ),
    "aiohttp-settle-dropped": (
        "adapters/permits/aiohttp.py",
        "                if actual is not None:\n"
        "                    settle_in_time(permit, actual)\n",
        "                pass\n",
        "aiohttp's middleware reads what a response cost and never settles its permit",
    ),
    "retry-after-past-redis-fatal": (
        "adapters/permits/_upstream.py",
        "            except PermitValueError:\n                # a pause the limiter cannot hold",
        "            except LimiterClosed:\n                # a pause the limiter cannot hold",
        "a Retry-After past what a Redis limiter holds (1e9 s, with a max_pause past it)"
        " raises out of the transport, and the 429 is lost",
    ),
    "retry-finds-closed-raises": (
        "adapters/permits/_upstream.py",
        "LATE = (AcquireTimeout, WouldWaitTooLong, QueueFull, LimiterClosed)\n",
        "LATE = (AcquireTimeout, WouldWaitTooLong, QueueFull)\n",
        "a 429 whose retry finds the limiter closed as it waits is lost: LimiterClosed raised",
    ),
    "retry-swallows-a-broken-limiter": (
        "adapters/permits/_upstream.py",
        "    if isinstance(error, LimiterClosed) and error.cause is not None:\n"
        "        raise error\n",
        "    return\n",
        "a limiter that breaks as a retry waits is taken for closed: the 429 returned, the fault"
        " unsaid",
    ),
    "jitter-draw-unchecked": (
        "adapters/permits/_upstream.py",
        "            seconds = min(backoff(attempt, self._draw()), self.max_pause)\n",
        "            seconds = min(backoff(attempt, self.jitter()), self.max_pause)\n",
        "a jitter that draws outside [0, 1] makes a negative or NaN backoff, refused as"
        " seconds (an argument the user never wrote), or a longer one",
    ),
    "x-ratelimit-requests-by-name-only": (
        "adapters/permits/_upstream.py",
        "            limit = self._limit_counting(name)\n",
        "            limit = next((n for n in self.limiter.limits if n.lower() == name), None)\n",
        "the x-ratelimit-*-requests headers reach only a limit named requests: under a limiter"
        " opened with rate= (its one limit, units) they are ignored, where the RateLimit"
        " field's requests reach the first limit",
    ),
    "x-ratelimit-requests-to-any-first-limit": (
        "adapters/permits/_upstream.py",
        '        return "units" if unit == "requests" and list(limits) == ["units"] else None\n',
        '        return next(iter(limits)) if unit == "requests" else None\n',
        "the x-ratelimit-*-requests headers and a RateLimit item in requests reach whatever"
        " limit comes first: a limiter whose first limit counts tokens takes the requests left"
        " for tokens left",
    ),
    "held-by-a-limit-not-costed": (
        "adapters/permits/_upstream.py",
        "        if not any(_charges(cost, limit) for limit in held):\n",
        "        if not held:\n",
        "a 429 whose headers say a limit the request does not cost is used up takes no backoff:"
        " its retry's permit, held back by nothing, sends it again at once, every try",
    ),
    "backoff-counted-without-a-retry": (
        "adapters/permits/_upstream.py",
        "            if not retry(max(seconds, self.limiter.pause_left()), attempt, retries,"
        " timeout):\n",
        "            if not retry(seconds, attempt, retries, timeout):\n",
        "a backoff is paused for and counted while a longer pause in force keeps the retry past"
        " the timeout: the response is returned, a backoff counted that preceded no retry",
    ),
    "async-option-taken": (
        "adapters/permits/_upstream.py",
        "        if inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(\n",
        "        if False and inspect.iscoroutinefunction(\n",
        "an async def given as settle (or cost, level, flow) is taken, and each call's"
        " coroutine, never awaited, fails every response the upstream served",
    ),
    "httpx-function-named-as-extension": (
        "adapters/permits/httpx.py",
        "or request.extensions.get(key) is None:\n",
        "or key not in request.extensions:\n",
        "a bad level or flow from the transport's function is named as the extension the"
        " request left at None",
    ),
    # -- the metrics exports, the small Redis client, virtual time ----------
    "metrics-equal-bounds": (
        "adapters/permits/adapters/_metrics.py",
        "or any(a >= b for a, b in itertools.pairwise(bounds))",
        "or any(a > b for a, b in itertools.pairwise(bounds))",
        "the histogram takes a bucket bound twice (two buckets of one bound)",
    ),
    "metrics-bound-past-nanoseconds": (
        "adapters/permits/adapters/_metrics.py",
        "or not all(math.isfinite(b * 1e9) for b in bounds)",
        "or not all(math.isfinite(b) for b in bounds)",
        "a bucket bound past a float's nanoseconds (1e300 s) is taken: the Prometheus"
        " collector's making raises an OverflowError",
    ),
    "metrics-level-named-twice": (
        "adapters/permits/adapters/_metrics.py",
        "        if name in level_names[:i]:\n",
        "        if False:\n",
        "two levels may share a name, so that their series are one",
    ),
    "prometheus-inf-counts-the-waiting": (
        "adapters/permits/adapters/prometheus.py",
        'buckets.append(("+Inf", level.granted))',
        'buckets.append(("+Inf", level.granted + level.waiting))',
        "the histogram's +Inf bucket (its count) counts the waiters too, not the waits",
    ),
    "prometheus-wait-sum-in-ns": (
        "adapters/permits/adapters/prometheus.py",
        "in_seconds(level.wait_total_ns or 0))",
        "level.wait_total_ns or 0)",
        "the histogram's sum in nanoseconds where its buckets are in seconds",
    ),
    "prometheus-paused-in-ns": (
        "adapters/permits/adapters/prometheus.py",
        "families.paused.add_metric(limiter, in_seconds(whole.paused_ns))",
        "families.paused.add_metric(limiter, whole.paused_ns)",
        "permits_paused_seconds exported in nanoseconds",
    ),
    "prometheus-one-name-twice": (
        "adapters/permits/adapters/prometheus.py",
        "        if any(known.name == name for known in self._sources):\n",
        "        if False:\n",
        "two limiters of one collector under one name (their series are one)",
    ),
    "otel-paused-in-ns": (
        "adapters/permits/adapters/opentelemetry.py",
        "callbacks=[whole(lambda limiter: in_seconds(limiter.statistics().paused_ns))],",
        "callbacks=[whole(lambda limiter: limiter.statistics().paused_ns)],",
        "permits.paused observed in nanoseconds where its unit is s",
    ),
    "otel-longest-in-ms": (
        "adapters/permits/adapters/opentelemetry.py",
        "                in_seconds(level.wait_max_ns),\n",
        "                level.wait_max_ns / 1e6,\n",
        "permits.wait.max observed in milliseconds where its unit is s",
    ),
    "otel-uninstrumented-still-records": (
        "adapters/permits/adapters/opentelemetry.py",
        "told for told in limiter._on_proceed if told is not source.record",
        "told for told in limiter._on_proceed",
        "a limiter no longer instrumented still records its waits in the histogram",
    ),
    "resp-bulk-read-short": (
        "adapters/permits/adapters/_resp.py",
        "        if len(buffer) < stop + 2:\n            return _PARTIAL, at\n",
        "",
        "a bulk string split across two reads is taken short, as it is so far",
    ),
    "resp-loading-is-an-answer": (
        "adapters/permits/adapters/_resp.py",
        '    "LOADING": redis.exceptions.BusyLoadingError,\n',
        "",
        "a server still loading its data answers as one that refused the script,"
        " not as one unreachable for now",
    ),
    "resp-submit-no-script-reload": (
        "adapters/permits/adapters/_resp.py",
        "            if isinstance(reply, redis.exceptions.NoScriptError):\n"
        "                load = encode(",
        "            if False:\n                load = encode(",
        "a submitted take that finds the script unloaded (a restarted server) fails,"
        " where it loads it and sends the take again",
    ),
    "testing-jump-short": (
        "adapters/permits/testing.py",
        "        if _seconds(ns) < when:\n            ns += 1\n        self._set(ns)",
        "        self._set(ns)",
        "the asyncio loop's virtual clock may jump to a nanosecond short of the timer,"
        " which asyncio then runs early (within its clock's resolution)",
    ),
    "testing-trio-jump-short": (
        "adapters/permits/testing.py",
        "            if _seconds(ns) < deadline:\n                ns += 1\n",
        "",
        "trio's virtual clock jumps to a nanosecond that may fall short of the deadline",
    ),
    "testing-executor-not-awaited": (
        "adapters/permits/testing.py",
        "        self._executor_jobs += 1\n        future.add_done_callback(",
        "        self._executor_jobs += 0\n        future.add_done_callback(",
        "the virtual clock jumps while a job runs in the executor (it waits for it)",
    ),
    "testing-jumps-while-trio-waits-for-idle": (
        "adapters/permits/testing.py",
        "        if not math.isfinite(deadline * 1e9) or _waiting_for_idle():\n",
        "        if not math.isfinite(deadline * 1e9):\n",
        "trio's virtual clock jumps while a task waits in wait_all_tasks_blocked()",
    ),
    "live-gives-up-a-nanosecond-early": (
        "adapters/permits/cli/_live.py",
        "                if elapsed() < at:\n",
        "                if elapsed() < at - 1:\n",
        "a live caller gives up as asyncio runs its timer, up to a nanosecond early (in the"
        " turn of the grant due then, which it hands back), not at its nanosecond",
    ),
    "live-arrives-a-nanosecond-early": (
        "adapters/permits/cli/_live.py",
        "            while elapsed() < at:\n",
        "            while elapsed() < at - 1:\n",
        "a live caller arrives as asyncio runs its timer, up to a nanosecond early, not at"
        " its nanosecond",
    ),
    "recording-gives-up-from-the-start": (
        "adapters/permits/adapters/_recording.py",
        "            waited = now - self.start_ns - call.at_ns\n",
        "            waited = now - self.start_ns\n",
        "a recorded caller that gave up is replayed as giving up after the time since the"
        " recording began, not after its own wait",
    ),
    "recording-previous-not-told": (
        "adapters/permits/adapters/_recording.py",
        "            self._previous.gave_up(id, now)\n",
        "            pass\n",
        "a caller recorded by a recording since replaced gives up unrecorded (it is replayed"
        " as waiting on)",
    ),
    "recording-drops-uncounted": (
        "adapters/permits/adapters/_recording.py",
        "            self.dropped += 1\n            return\n",
        "            return\n",
        "calls past max_calls are dropped without being counted",
    ),
    "recording-cost-not-copied": (
        "adapters/permits/adapters/_recording.py",
        "            cost = dict(cost) if len(self.limits) > 1 else",
        "            cost = cost if len(self.limits) > 1 else",
        "a recorded cost mapping is the caller's own, changed with it after the call",
    ),
    "recording-partial-left": (
        "adapters/permits/adapters/_recording.py",
        "            partial.unlink(missing_ok=True)\n",
        "",
        "a recording whose write failed leaves its partial file beside the path",
    ),
    "redis-refused-password-closes": (
        "adapters/permits/adapters/redis.py",
        "    if type(error) is not redis.exceptions.ResponseError:\n        return error\n",
        "    if isinstance(error, redis.exceptions.AuthenticationError):\n"
        "        return redis.exceptions.ResponseError(str(error))\n"
        "    if type(error) is not redis.exceptions.ResponseError:\n        return error\n",
        "a password the server refuses (changed there) closes the limiter, where it is an"
        " outage that ends when the password works again",
    ),
    "float-rate-read-as-binary": (
        "checks.py",
        "        return Fraction(repr(float(value)))",
        "        return Fraction(value)",
        "a float rate is read as the binary fraction it holds, not the decimal it prints as"
        " (0.1 is 3602879701896397/36028797018963968, not 1/10: P77)",
    ),
    "empty-limit-name-a-type-error": (
        "checks.py",
        '            raise PermitValueError("limits", limits, EMPTY_LIMIT_NAME)',
        '            raise PermitTypeError("limits", limits, EMPTY_LIMIT_NAME)',
        "a limit named with the empty string, a str of the wrong value, is refused as the"
        " wrong type (P18)",
    ),
    "error-shows-a-huge-int-by-repr": (
        "_errors.py",
        '        super().__init__(f"{argument}={shown(value)}: {reason}")',
        '        super().__init__(f"{argument}={value!r}: {reason}")',
        "an error naming an int of more digits than repr gives (10**10000) raises a ValueError"
        " of its own message (P108)",
    ),
    "decimal-rate-exponent-one-past": (
        "checks.py",
        "    if isinstance(value, Decimal) and abs(value.adjusted()) > RATE_EXPONENT:",
        "    if isinstance(value, Decimal) and abs(value.adjusted()) > RATE_EXPONENT + 1:",
        "a Decimal rate of exponent 10,001 is taken, one past the bound (P97)",
    ),
    "machine-copied-shallow": (
        "_machine.py",
        "    def __copy__(self) -> Machine:",
        "    def _not_copy(self) -> Machine:",
        "copy.copy of a machine is Python's shallow copy: the copy shares its queues, buckets"
        " and counts with the original, and a push to one queues in the other (P98)",
    ),
    "waiting-in-push-order": (
        "_machine.py",
        "        return self._queues.waiters(self._check_level(level))\n",
        "        return sorted(self._queues.waiters(self._check_level(level)),"
        " key=lambda w: w.seq)\n",
        "waiting(level) lists a level's waiters in push order, not the order its flows"
        " would be granted in (P78)",
    ),
    "failed-plan-left-standing": (
        "_machine.py",
        "                source.unplan()\n",
        "                pass\n",
        "a cancel whose next choice the policy fails to make leaves the due time planned for"
        " the cost of the waiter that left: the next tick is late (P18)",
    ),
    "rescale-multiplies-the-heads-finishes": (
        "_queues.py",
        "        for _, flow in heads:\n            self._enter(flow, first=False)\n",
        "        for key, flow in heads:\n"
        "            flow.entry = ((key >> SHIFT) * factor << SHIFT) + (key & _SEQ)\n"
        "            self.heads.insert(flow.entry, flow)\n",
        "a scale that grows after it stopped at MAX_SCALE multiplies each head's finish, rounded"
        " up at the old scale, by the factor: a flow pushed first loses its tie (P78, P13)",
    ),
    "queue-full-names-the-level-past-its-cap": (
        "_machine.py",
        "self._queues.depths[level] >= most",
        "self._queues.depths[level] > most",
        "queue_full names the flow's max_waiting_per_flow when the level is exactly at its"
        " max_waiting (P79)",
    ),
    "seconds-truncated-to-the-nanosecond": (
        "adapters/permits/adapters/_base.py",
        "    return None if ns > sys.float_info.max else round(ns)\n",
        "    return None if ns > sys.float_info.max else int(ns)\n",
        "an adapter's durations in seconds are truncated to the nanosecond, not rounded"
        " to the nearest (P80)",
    ),
    "long-values-shown-whole": (
        "_errors.py",
        "    if len(text) > MAX_SHOWN:\n",
        "    if len(text) > MAX_SHOWN * 10**9:\n",
        "a value whose repr runs to hundreds of thousands of characters is shown whole in the"
        " message of the error that names it (P108)",
    ),
    "cost-entry-named-as-the-whole": (
        "checks.py",
        '    entry = f"{argument}[{shown(name)}]"\n',
        "    entry = argument\n",
        "a cost mapping's bad entry is named as the whole argument (cost=-1), not by its"
        " entry (cost['tokens']=-1: P18, P69)",
    ),
    "infinite-timeout-no-wait": (
        "adapters/permits/adapters/_base.py",
        'patience = None if timeout is None else _nanoseconds("timeout", timeout)\n',
        'patience = None if timeout is None else _nanoseconds("timeout", timeout) or 0\n',
        "an infinite timeout is read as no wait at all, not as none (P87)",
    ),
    "infinite-max-wait-none-at-all": (
        "adapters/permits/adapters/_base.py",
        'limit = None if max_wait is None else _nanoseconds("max_wait", max_wait)\n',
        'limit = None if max_wait is None else _nanoseconds("max_wait", max_wait) or 0\n',
        "an infinite max_wait refuses every acquire that would wait (P87)",
    ),
    "threads-close-interrupted-left-open": (
        "adapters/permits/adapters/threads.py",
        "        despite_interrupt(self._close)\n",
        "        self._close()\n",
        "an interrupt that lands before closing holds the lock leaves the thread limiter"
        " open after its block, its timer and waiters running on",
    ),
    "threads-withdraw-interrupted-left-queued": (
        "adapters/permits/adapters/threads.py",
        "        despite_interrupt(withdraw)\n",
        "        withdraw()\n",
        "a second interrupt as an interrupted thread withdraws leaves it queued for nobody,"
        " every caller after it behind it",
    ),
    "try-acquire-interrupted-left-in-flight": (
        "adapters/permits/adapters/_base.py",
        "        except BaseException:\n"
        "            # An interrupt before the caller proceeds (one lands between any\n",
        "        except ZeroDivisionError:\n"
        "            # An interrupt before the caller proceeds (one lands between any\n",
        "an interrupt as try_acquire takes a permit granted past waiters leaves it in flight"
        " for nobody, holding its place in the bucket for ever",
    ),
    "permit-copied-with-its-limiter": (
        "adapters/permits/adapters/_base.py",
        "        return _copy, (self.level, self.cost, self.flow)\n",
        "        return object.__reduce_ex__(self, 2)\n",
        "a Permit pickles with its limiter (and its lock): a refused settle's error cannot"
        " leave a worker process, and a copy settles the original's permit (P95)",
    ),
    "errors-rebuilt-from-their-message": (
        "_errors.py",
        "        return (_rebuilt, (type(self), self.args), self.__dict__)\n",
        "        return super().__reduce__()\n",
        "an error is pickled as Exception's are, rebuilt by calling its class with its"
        " message alone: it cannot be unpickled or copied (P95)",
    ),
    "free-take-a-nanosecond-early": (
        "_machine.py",
        "        source = self._source\n        if now < source.due:\n",
        "        source = self._source\n        if now < source.due - 1:\n",
        "a take while nobody waits is granted a nanosecond before its permit falls due: one"
        " unit more in a window than the limit allows (P1, P47)",
    ),
    "settle-grants-nothing": (
        "_machine.py",
        "        self._reprice(grant, settled_units(grant.cost, settled), now)\n"
        "        self._grant(now, out)\n",
        "        self._reprice(grant, settled_units(grant.cost, settled), now)\n",
        "units a settle gives back wait for the next tick, though a waiter they let fit"
        " waits meanwhile (P2)",
    ),
    "mend-puts-the-later-chunk-first": (
        "_queues.py",
        "chunks[i - 1] += chunks.pop(i)",
        "chunks[i - 1][:0] = chunks.pop(i)",
        "a thin chunk mended into the one before it goes first: its waiters pass the"
        " earlier ones of their flow (P6)",
    ),
    "every-n-is-one-in-n-plus-1": (
        "_policies.py",
        "        return cls((n - 1, 1), limit=limit)\n",
        "        return cls((n, 1), limit=limit)\n",
        "Shares.every(N) gives level 1 one grant in N + 1, not one in N (P8)",
    ),
    "fifo-keeps-no-firsts": (
        "_machine.py",
        "        ages = isinstance(policy, Aging) or (isinstance(policy, Fifo) and levels > 1)\n",
        "        ages = isinstance(policy, Aging)\n",
        "a Fifo of several levels keeps no flow heads by push order: each choice looks"
        " through every flow of a level (P15)",
    ),
    "supplied-refund-kept-at-hand": (
        "_machine.py",
        "        self._grant(now, out)\n        self._source.discard()\n        return out\n",
        "        self._grant(now, out)\n        return out\n",
        "a supplied permit refunded with nobody waiting is kept, and a later push takes it"
        " though nothing was supplied (P20)",
    ),
    "quota-ignores-held-in-due": (
        "_bucket.py",
        "                    if until > due and self.held + self.n > left:\n",
        "                    if until > due and self.n > left:\n",
        "a quota's due time leaves out the units in flight: spending at once lets through"
        " more than charging at the grant (P25)",
    ),
    "too-long-judged-before-the-tick": (
        "_machine.py",
        "        out = self.tick(now)\n"
        "        if max_wait_ns is not None and self._least_wait(level, units, flow, now, out)"
        " > max_wait_ns:\n",
        "        last = now if self._now is None else self._now\n"
        "        early = max_wait_ns is not None and self._least_wait(level, units, flow, last, [])"
        " > max_wait_ns\n"
        "        out = self.tick(now)\n"
        "        if early:\n",
        "a push's best case is judged from before its own tick, at the machine's last time:"
        " one that fits is refused (P53)",
    ),
    "zero-cost-ignores-the-pause": (
        "_bucket.py",
        "            return max(0, self.until - now)\n",
        "            return 0\n",
        "a limit a cost takes nothing from says it holds nothing back in a pause (P96)",
    ),
    "sim-seed-ignored": (
        "sim/_run.py",
        "    seeds = [scenario.seed * 1_000_003 + w for w in range(len(scenario.workloads))]\n",
        "    seeds = list(range(len(scenario.workloads)))\n",
        "every seed runs as one: another seed gives the same run (P56)",
    ),
    "sim-p99-over-granted": (
        "sim/_compare.py",
        "                at = offered_quantile(w.waits_ns, w.offered, q)\n",
        "                at = offered_quantile(w.waits_ns, w.granted, q)\n",
        "compare ranks by the p99 of the callers granted: a policy that leaves half the"
        " urgent callers without a permit can win (P61)",
    ),
    "sim-one-flow-tenants-refused": (
        "sim/_compare.py",
        "            and workload.flow is None\n            and workload.tenants is None\n",
        "            and workload.tenants is None\n",
        "a requirement on the tenants of a workload whose callers all name one flow is"
        " refused, not judged (P99)",
    ),
    "settle-window-a-nanosecond-long": (
        "_ledger.py",
        "(window is None or grant.at < now - window)",
        "(window is None or grant.at < now - window - 1)",
        "a permit granted a nanosecond more than the settle window ago is still refunded (P5)",
    ),
    "aging-key-in-floats": (
        "_policies.py",
        "key = (level * after + head.pushed_at, head.seq)",
        "key = (level - (now - head.pushed_at) / after, head.seq)",
        "aging ranks by its formula in floats: past 2**53 afters of age, keys of two levels"
        " round alike and the tie goes by push order (P9)",
    ),
    "rescale-forgets-the-clock": (
        "_queues.py",
        "        self.clock *= factor\n",
        "",
        "a new weight rescales a level's flows but not its clock: a flow that joins then"
        " starts far behind the others and passes their heads (P35)",
    ),
    "set-limit-refuses-a-waiter-its-tick-expires": (
        "_machine.py",
        "if w.deadline is None or w.deadline > now  # (the tick expires the others)",
        "if w.deadline is None or w.deadline >= now  # (the tick expires the others)",
        "a lower burst is refused for a waiter whose deadline is now, which the call's own"
        " tick expires (P30)",
    ),
    "redis-demand-holds-at-its-expiry": (
        "adapters/permits/adapters/redis.lua",
        "        if words[1] <= now then\n",
        "        if words[1] < now then\n",
        "a process's demand still blocks the others at the microsecond it expires: a booking"
        " is refused for it (P42, P44)",
    ),
    "redis-lease-served-out-stays-in-line": (
        "adapters/permits/adapters/redis.lua",
        "if waiting > taken and",
        "if waiting > 1 and",
        "a process whose lease served every waiter it had stays in the line, counted ahead"
        " of a newcomer (P48)",
    ),
    "redis-rate-alone-unchecked": (
        "adapters/permits/adapters/redis.lua",
        "  if newb * newT > 1e15 then\n",
        "  if newb * newT > 1e15 and newb ~= burst[arg] then\n",
        "a change of the rate alone to one that would take ages to refill the burst is"
        " stored (P21)",
    ),
    "body-base-exception-wrapped": (
        "adapters/permits/adapters/_tasked.py",
        "        except BaseException as error:\n            # The body's",
        "        except Exception as error:\n            # The body's",
        "a body's exception that is no Exception (KeyboardInterrupt's kind) leaves trio's and"
        " anyio's open_limiter wrapped in a group (P63)",
    ),
    "live-call-wakes-the-first": (
        "adapters/permits/adapters/_base.py",
        "        self._dispatch(decisions)\n        self._reschedule()\n\n    def _settle(",
        "        self._dispatch(decisions[:1])\n        self._reschedule()\n\n    def _settle(",
        "a live call that decides for two waiters wakes the first: the other holds a permit"
        " and sleeps (P64)",
    ),
    "break-lets-a-policy-error-out": (
        "adapters/permits/adapters/_base.py",
        "                with suppress(Exception):  # a broken policy, asked its next choice\n"
        "                    self._machine.cancel(id)\n",
        "                self._machine.cancel(id)\n",
        "closing with a policy that raises stops at the first waiter it cancels: the others"
        " never wake",
    ),
    "pause-until-a-zone-of-no-offset": (
        "adapters/permits/adapters/_base.py",
        "    if when.utcoffset() is None:\n",
        "    if when.tzinfo is None:\n",
        "a datetime in a time zone that names no offset, naive too, is taken as a moment and"
        " fails on Python's own TypeError (P69)",
    ),
    "redis-plain-take-time-unbounded-below": (
        "adapters/permits/adapters/redis.lua",
        "    if not (tat <= 9007199254740992 and tat >= -9007199254740992) then",
        "    if not (tat <= 9007199254740992) then",
        "the plain take reads a bucket time of -1e300 as a full bucket (P70)",
    ),
    "redis-quota-word-unchecked": (
        "adapters/permits/adapters/redis.lua",
        "        words[#words + 1] = number(word, fields[n + i + 1])\n",
        "        words[#words + 1] = tonumber(word)\n",
        "a quota of one word past 2**53 (or none) beside a good one is read as a quota (P70)",
    ),
    "redis-changed-rate-falls-back": (
        "adapters/permits/adapters/redis.lua",
        "    T[i] = number(string.sub(live[i], 1, sep - 1), names[i] .. ' of the changed"
        " limits')\n",
        "    T[i] = tonumber(string.sub(live[i], 1, sep - 1)) or T[i]\n",
        "a changed limit whose interval is no number falls back to the configured one (P70)",
    ),
    "redis-changed-burst-falls-back": (
        "adapters/permits/adapters/redis.lua",
        "    burst[i] = number(string.sub(live[i], sep + 1), names[i] .. ' of the changed"
        " limits')\n",
        "    burst[i] = tonumber(string.sub(live[i], sep + 1)) or burst[i]\n",
        "a changed limit whose burst is no number falls back to the configured one (P70)",
    ),
    "redis-outage-words-anywhere": (
        "adapters/permits/adapters/redis.py",
        "    if text.startswith(_NOT_NOW):\n",
        "    if any(word.strip() in text for word in _NOT_NOW):\n",
        "a script's fault whose text holds BUSY (a field saying so) is counted as an outage,"
        " naming no key to delete (P73)",
    ),
    "redis-own-client-reply-uncounted": (
        "adapters/permits/adapters/redis.py",
        "                    error = _counted(reply, self.key)\n",
        "                    error = reply\n",
        "the limiter's own client (asyncio) reads a real -NOREPLICAS as a fault that closes"
        " the limiter (P73)",
    ),
    "redis-py-reply-uncounted": (
        "adapters/permits/adapters/redis.py",
        "            self._client.connection_pool.disconnect()\n"
        "        return _counted(error, self.key)\n",
        "            self._client.connection_pool.disconnect()\n        return error\n",
        "redis-py's client (trio, threads) reads a real -NOREPLICAS as a fault that closes the"
        " limiter (P73)",
    ),
}


def adapter(file: str) -> bool:
    """Whether ``file`` (a mutant's) is under ``adapters/permits``."""
    return file.startswith("adapters/")


def source(root: Path, file: str) -> Path:
    """The file a mutant edits, in the tree ``root`` (the repository, or the
    copy a mutant runs on): ``adapters/permits/...`` as it is, ``sim/...``
    under ``core/permits``, any other under ``core/permits/core``."""
    if adapter(file):
        return root / file
    return root / "core" / "permits" / (file if file.startswith("sim/") else f"core/{file}")


def module(file: str) -> str:
    """The module a mutant of ``file`` edits (``permits.core._machine``),
    or the one that reads it (``READ_BY``)."""
    path = source(Path(), READ_BY.get(file, file)).with_suffix("")
    return ".".join(path.parts[1:])


def stale(root: Path = ROOT) -> list[str]:
    """The mutants whose text to replace is not in its file of ``root``
    exactly once (each would run the code unbroken), and those of an
    adapter's file that ``ADAPTER_TESTS`` names no tests for."""
    return [
        f"{name} ({file}: found {count} times)"
        for name, (file, old, _, _) in MUTANTS.items()
        if (count := source(root, file).read_text().count(old)) != 1
    ] + [
        f"{name} ({file}: no tests in ADAPTER_TESTS)"
        for name, (file, *_) in MUTANTS.items()
        if adapter(file) and file not in ADAPTER_TESTS
    ]


def tests(file: str) -> list[str]:
    """What a mutant of ``file`` runs: its adapter area's tests, the
    simulator's, or the core properties."""
    if adapter(file):
        return list(ADAPTER_TESTS[file])
    return list(SIM_TESTS) if file.startswith("sim/") else ["properties"]


def run(name: str, model: bool = True) -> tuple[str, set[str], list[str]]:
    file, old, new, _ = MUTANTS[name]
    tree = "adapters" if adapter(file) else "core"
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp)
        shutil.copytree(ROOT / tree, copy / tree)
        target = source(copy, file)
        text = target.read_text()
        if text.count(old) != 1:
            return ("stale", set(), [f"the text to mutate is not in {file} exactly once"])
        target.write_text(text.replace(old, new))
        # The copy comes first on the path: a core copy's permits/__init__
        # joins this tree's adapters (pkgutil.extend_path); an adapters
        # copy's permits/ joins this tree's core, its modules found before
        # this tree's adapters (the editable install's path comes later).
        path = [str(copy / tree)] + ([str(ROOT / "core")] if tree == "adapters" else [])
        env = dict(os.environ, HYPOTHESIS_PROFILE="mutants", PYTHONPATH=os.pathsep.join(path))
        if not model:
            env["PERMITS_PROPERTIES_WITHOUT_MODEL"] = "1"
        imported = subprocess.run(
            [sys.executable, "-c", f"import {module(file)} as m; print(m.__file__)"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if imported.stdout.strip() != str(source(copy, READ_BY.get(file, file))):
            said = imported.stdout.strip() or imported.stderr.strip().splitlines()[-1:]
            return ("not-run", set(), [f"{module(file)} is not imported from the copy: {said}"])
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                *tests(file),
                "-v" if adapter(file) else "-q",  # -v: the test a hang cut short is named
                "-p",
                "no:cacheprovider",
                "-o",
                "addopts=--import-mode=importlib",
                # A mutant that makes a test hang is caught, but need not take
                # 5 min. An adapter's tests take 3 s at most; one that leaves
                # a waiter hanging can hang where a signal does not reach
                # (trio's run, waiting for nothing on virtual time): the
                # run ends there (its thread method), and the failures so
                # far, and the test it cut short, name the mutant.
                "--timeout",
                "30" if adapter(file) else "60",
                *(["--timeout-method=thread", "--maxfail", str(MAXFAIL)] if adapter(file) else []),
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
    if adapter(file):  # -v: each test's line (its id may hold spaces), a hang's cut short
        verdict = r"^(\S+::.+?) (?:FAILED|ERROR|\++ Timeout \++$)"
        failed = set(re.findall(verdict, result.stdout, re.M))
    else:
        failed = set(re.findall(r"^FAILED (\S+?)(?:::runTest)?(?: |$)", result.stdout, re.M))
    # Read the tracebacks only: pytest's one-line summary truncates messages.
    trace = "\n".join(line for line in result.stdout.splitlines() if not line.startswith("FAILED"))
    ids = set(re.findall(r"AssertionError: \(?'?(P\d+)\b", trace))
    ids |= {
        f"check_valid: {m}"
        for m in re.findall(r"AssertionError: invariant broken: ([^'\"\n]+)", trace)
    }
    ids |= set(re.findall(r"^E\s+(?:[\w.]+\.)?((?!Assertion)\w+Error)\b", trace, re.M))
    if re.search(r"Failed: Timeout|^\S+::.+ \++ Timeout \++$", trace, re.M):
        ids.add("a hang (pytest-timeout)")
    if file.startswith("sim/") or adapter(file):  # these tests carry their ids in their docstrings
        ids |= {pid for test in failed for pid in named_by(test)}
    return ("caught" if result.returncode else "SURVIVED", ids, sorted(failed))


def named_by(test: str) -> set[str]:
    """The property ids the docstring of ``test`` (``file.py::name[...]``) names."""
    import ast

    path, _, name = test.partition("::")
    tree = ast.parse((ROOT / path).read_text())
    name = name.split("[")[0]
    found = next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name
        ),
        None,
    )
    doc = ast.get_docstring(found) if found is not None else None
    return set(re.findall(r"\bP\d+\b", doc or ""))


def grouped(failed: list[str]) -> list[str]:
    """The tests ``failed``, each parametrized one once with its cases
    (``test_x[a, b]``): the conformance suite runs each test on every
    adapter."""
    cases: dict[str, list[str]] = {}
    for test in failed:
        name, _, case = test.partition("[")
        cases.setdefault(name, [])
        if case:
            cases[name].append(case[:-1])
    return [f"{name}[{', '.join(c)}]" if c else name for name, c in cases.items()]


def main(names: list[str]) -> int:
    if "--help" in names or "-h" in names:
        print(__doc__)
        wide = max(map(len, MUTANTS))
        for name, (file, _, _, breaks) in MUTANTS.items():
            print(f"{name:{wide}} {file:16} {breaks}")
        return 0
    survivors = 0
    alone_too = "--caught-only" not in names  # skip the run without the model
    names = [name for name in names if name != "--caught-only"]
    unknown = [name for name in names if name not in MUTANTS]
    if unknown:
        print(f"no such mutant: {', '.join(unknown)} (--help lists them)", file=sys.stderr)
        return 2
    for name in names or list(MUTANTS):
        verdict, ids, failed = run(name)
        survivors += verdict != "caught"
        file = MUTANTS[name][0]
        if verdict == "caught" and alone_too and tests(file) == ["properties"]:
            # Which properties catch it on their own, without the model (P13)?
            alone, alone_ids, _ = run(name, model=False)
            ids |= {f"{p} (without the model)" for p in alone_ids} or {
                f"nothing without the model ({alone})"
            }

        def order(found: str) -> tuple[int, str]:
            number = re.match(r"P(\d+)", found)
            return (int(number.group(1)), found) if number else (10**6, found)

        properties = ", ".join(sorted(ids, key=order)) or "-"
        print(f"{name:22} {verdict:9} {MUTANTS[name][3]}")
        print(f"{'':33}failed: {properties}")
        for test in grouped(failed):
            print(f"{'':33}{test}")
        sys.stdout.flush()
    return 1 if survivors else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
