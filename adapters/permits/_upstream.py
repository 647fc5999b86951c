"""What an upstream's response says about its limit, applied to a limiter:
the part the HTTP integrations (:mod:`permits.httpx`, :mod:`permits.aiohttp`)
share. No HTTP library is imported here."""

from __future__ import annotations

import inspect
import logging
import math
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from datetime import timezone
from email.utils import parsedate_to_datetime
from fractions import Fraction
from typing import TypeVar

import attrs

from permits.adapters._base import (
    AcquireTimeout,
    LimiterClosed,
    Permit,
    WouldWaitTooLong,
    _Limiting,
    _nanoseconds,
)
from permits.core import NotRefundable, PermitTypeError, PermitValueError, QueueFull
from permits.core.checks import NO_UNIT, check_int

__all__ = [
    "BACKOFF",
    "MAX_BACKOFF",
    "MAX_PAUSE",
    "QuotaPolicy",
    "THROTTLED",
    "Cost",
    "Upstream",
    "check_options",
    "check_settle",
    "header_text",
    "LATE",
    "raise_if_broken",
    "backoff",
    "parse_duration",
    "retry",
    "settle_in_time",
]

log = logging.getLogger("permits.upstream")

Cost = int | Mapping[str, int]

#: The longest pause a Retry-After may set by default: an hour.
MAX_PAUSE = 3600.0

#: The pause before the first retry of a 429 or 503 that says no
#: ``Retry-After`` (and no reset to wait for), doubling with each try up to
#: :data:`MAX_BACKOFF`: the OpenAI and Anthropic clients' 0.5 s and 8 s.
BACKOFF = 0.5
MAX_BACKOFF = 8.0

#: The statuses of an upstream that refused a call for its limit: what they
#: say is learned, and the call is not settled (it was not served).
THROTTLED = (429, 503)

_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|ms|h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6, "ns": 1e-9}
#: The micro signs Go writes (U+00B5) and reads (U+03BC too) in ``µs``.
_MICRO = str.maketrans({"\u00b5": "u", "\u03bc": "u"})


def parse_duration(text: str) -> float | None:
    """Seconds in ``6m0s``, ``1.5s``, ``20ms``, ``1h2m3s`` or a bare number
    (``30``, ``0.5``), as Go writes a duration (below a millisecond, in
    ``µs`` or ``us``, and ``ns``); ``None`` if it is none of those (a
    sign, an exponent, an underscore: what ``float`` reads and HTTP does
    not write), or written in other digits than ASCII's (which ``float``
    and ``\\d`` read)."""
    if not isinstance(text, str):
        raise PermitTypeError("text", text, "a str, as a header writes a duration")
    text = text.strip().translate(_MICRO)
    if not text.isascii():
        return None
    if _NUMBER.fullmatch(text):
        value = float(text)
        return value if math.isfinite(value) else None
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    seconds = sum(float(n) * _UNITS[u] for n, u in parts)
    return seconds if math.isfinite(seconds) else None


def _whole_number(text: str) -> int | None:
    """The number ``text`` (stripped) writes in ASCII digits (``"²"`` is a
    digit to ``isdigit``, not to ``int``); ``None`` if it is none, or has
    more digits than ``int`` reads (4,300 by default: a ``ValueError``)."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()):
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _left(text: str) -> int | None:
    """The units ``text`` says are left: a whole number, a negative one
    read as none (Azure OpenAI's ``x-ratelimit-remaining-tokens`` goes
    below 0 once the window is oversubscribed); ``None`` if it is none."""
    text = text.strip()
    if text.startswith("-") and text[1:].isascii() and text[1:].isdigit():
        return 0
    return _whole_number(text)


_T = TypeVar("_T", int, float)


def _cautious(
    text: str, read: Callable[[str], _T | None], pick: Callable[[list[_T]], _T]
) -> _T | None:
    """The value of a header that may have come on several lines (a proxy
    that repeats it: ``5, 3``), each read by ``read``, ``pick`` of them (the
    least left, the longest reset: the cautious reading); ``None`` if any
    is not one."""
    values = [read(part) for part in text.split(",")]
    if any(value is None for value in values):
        return None
    return pick([value for value in values if value is not None])


def _unread(text: str | None, read: Callable[[str], object | None]) -> bool:
    """Whether ``text``, a header sent (not ``None``, nor blank), has a line
    that does not read as ``read`` reads it (as :func:`_cautious` reads it)."""
    if text is None or not text.strip():
        return False
    return any(read(part) is None for part in text.split(","))


def _delay_seconds(text: str) -> float | None:
    """The seconds of a ``Retry-After`` that is a number (too long for a
    float: inf, which ``max_pause`` cuts); ``None`` if it is none."""
    text = text.strip()
    return float(text) if _NUMBER.fullmatch(text) else None


#: The commas between a ``Retry-After``'s values sent on several lines:
#: after a number or a date's ``GMT``, not the one after a date's day name.
_BETWEEN = re.compile(r"(?:(?<=[0-9])|(?<=GMT)),", re.IGNORECASE)


def _retry_after(value: str, now: float) -> tuple[float | None, bool]:
    """Seconds from now that a ``Retry-After`` says: a number of seconds or
    an HTTP date (0 for one in the past: go again now); ``None`` if it is
    neither. Sent on several lines (a proxy that repeats it, or adds its
    own), its values come joined by commas (``30, 30``, or a date beside
    another): the longest of those that are one (garbage beside the
    upstream's ``30`` does not lift its pause). And whether any is not."""
    seconds = [_one_retry_after(part, now) for part in _BETWEEN.split(value)]
    read = [s for s in seconds if s is not None]
    return (max(read) if read else None), len(read) < len(seconds)


def _one_retry_after(value: str, now: float) -> float | None:
    """Seconds from now that one ``Retry-After`` value says; ``None`` if it
    is neither a number of seconds nor an HTTP date."""
    seconds = _delay_seconds(value)
    if seconds is not None:
        return seconds
    try:
        date = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if date.tzinfo is None:  # asctime's form, or -0000: an HTTP date is in UTC
        date = date.replace(tzinfo=timezone.utc)
    return max(0.0, date.timestamp() - now)


def _members(field: str) -> list[tuple[str | None, dict[str, str]]]:
    """The members of a structured-field list (``"day";r=50;t=3600,
    burst;r=0;t=1``): each its identifier (unquoted; ``None`` for a member
    of parameters only) and its parameters."""
    members: list[tuple[str | None, dict[str, str]]] = []
    for member in _split(field, ","):
        name: str | None = None
        params: dict[str, str] = {}
        for i, part in enumerate(_split(member, ";")):
            # a quoted string is a name, whatever it holds (``"eu=west"``);
            # a parameter's key never starts with a quote
            key, equals, value = (part, "", "") if _quoted(part) else part.partition("=")
            if equals:
                params[key.strip()] = value.strip()
            elif not key.strip():
                continue
            elif i == 0:
                name = _unquoted(key.strip())
            else:  # a parameter with no value is a boolean one, true
                params[key.strip()] = "?1"
        members.append((name, params))
    return members


def _split(text: str, separator: str) -> list[str]:
    """``text`` split at each ``separator`` outside a quoted string (one in
    a name, ``"eu,west";r=5``, stays in it)."""
    parts, start, quoted, escaped = [], 0, False, False
    for i, char in enumerate(text):
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == separator and not quoted:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _quoted(text: str) -> bool:
    """Whether ``text`` (stripped) is a quoted string."""
    return text.strip().startswith('"')


def _unquoted(token: str) -> str:
    """A token as written, or a quoted string's content (``\\"`` and
    ``\\\\`` read as the characters they escape)."""
    if len(token) >= 2 and token[0] == token[-1] == '"':
        return re.sub(r"\\(.)", r"\1", token[1:-1])
    return token.strip('"')


def _ratelimit_items(field: str) -> list[tuple[str | None, str | None, str | None]]:
    """The ``(policy, remaining, reset)`` of each item of an IETF
    ``RateLimit`` field: the draft's list, one item per policy (``"burst";r=0;t=1,
    "day";r=50;t=3600``), or its earlier dictionary (``limit=100,
    remaining=20, reset=5``), one item with no policy. ``None`` where one is
    missing."""
    items: list[tuple[str | None, str | None, str | None]] = []
    dictionary: dict[str, str] = {}
    for name, params in _members(field):
        if "r" in params or "t" in params:
            items.append((name, params.get("r"), params.get("t")))
        else:
            dictionary.update(params)
    if not items or "remaining" in dictionary or "reset" in dictionary:
        items.append((None, dictionary.get("remaining"), dictionary.get("reset")))
    return items


#: The ``x-ratelimit-*`` headers that say what is left of a limit, and when.
_X_RATELIMIT = ("x-ratelimit-remaining-", "x-ratelimit-reset-")


def _x_ratelimit_names(headers: Mapping[str, str]) -> list[str]:
    """The names (lowercase, in order) that ``x-ratelimit-remaining-<name>``
    and ``x-ratelimit-reset-<name>`` headers among ``headers`` are sent for."""
    return sorted(
        {
            key[len(prefix) :]
            for key in map(str.lower, headers)
            for prefix in _X_RATELIMIT
            if key.startswith(prefix)
        }
    )


@attrs.frozen
class QuotaPolicy:
    """One policy of an IETF ``RateLimit-Policy`` field: ``quota`` units per
    ``window`` seconds (``None`` if not said), counted in ``unit``
    (``"requests"`` unless it says otherwise)."""

    quota: int
    window: float | None
    unit: str


def _quota_policies(field: str) -> tuple[dict[str, QuotaPolicy], int]:
    """The policies of a ``RateLimit-Policy`` field by name, and how many of
    its members did not parse (no name, or a quota that is no whole number).
    A member with no ``q`` is the draft's earlier form (its 7th version's,
    as express-rate-limit sends it): its quota is the member itself,
    ``100;w=60``, and names it."""
    policies: dict[str, QuotaPolicy] = {}
    malformed = 0
    for name, params in _members(field):
        if name is None and not params:
            continue  # an empty member (an empty field, a trailing comma)
        quota = _whole_number(params.get("q", name or ""))
        window = parse_duration(params["w"]) if "w" in params else None
        if name is None or quota is None or ("w" in params and not window):
            malformed += 1
            continue
        unit = params.get("qu", "requests").strip('"')
        policies[name] = QuotaPolicy(quota, window, unit)
    return policies, malformed


#: The most quota policies an :class:`Upstream` remembers by name: beyond,
#: the one named longest ago is forgotten (an upstream that names a policy
#: per key or per request would otherwise add one per response).
MAX_POLICIES = 64


class Upstream:
    """What one response says about the limit, applied to a limiter.

    Its counters may be read at any time; transports used from several
    threads at once count each response once (they are kept under a lock).
    """

    def __init__(
        self,
        limiter: _Limiting,
        max_pause: float = MAX_PAUSE,
        *,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        _check_max_pause(max_pause)
        _check_jitter(jitter)
        self.limiter = limiter
        self._max_pause = max_pause
        self._jitter = jitter
        #: Headers ignored because they did not parse (or said what the
        #: limiter cannot hold: a Redis limiter's reset or Retry-After past 1e9 s).
        self.malformed = 0
        #: Responses that paused the limiter (429 or 503 with Retry-After;
        #: or, before a retry, a :func:`backoff`).
        self.pauses = 0
        #: Of those, the 429s and 503s without a Retry-After (or a reset to
        #: wait for) that paused the limiter for a :func:`backoff` before a
        #: retry.
        self.backoffs = 0
        #: Responses that said the limit was exceeded (429), with or without
        #: a Retry-After.
        self.throttled = 0
        #: Items ignored because they count a unit that no limit here
        #: counts: a ``RateLimit`` item whose policy says so
        #: (``qu="content-bytes"``, say), and each name of the
        #: ``x-ratelimit-remaining-*``/``x-ratelimit-reset-*`` headers
        #: that is no limit's (``-tokens`` for a limiter of requests only;
        #: ``-requests`` reaches a ``rate=`` limiter's one limit, ``units``).
        self.ignored = 0
        #: The upstream's quota policies by name, each as the latest
        #: ``RateLimit-Policy`` field naming it said: the last
        #: :data:`MAX_POLICIES` named. Replaced whole, never changed in
        #: place: a thread that reads it (a response's ``RateLimit``) sees
        #: every policy another thread's response did not just rename.
        self.policies: dict[str, QuotaPolicy] = {}
        self._lock = threading.Lock()
        #: Whether a reset past max_pause was warned about.
        self._cut_said = False

    @property
    def max_pause(self) -> float:
        """The longest pause a response may make, in seconds (a longer
        ``Retry-After`` or reset is cut to it); set it as it is given."""
        return self._max_pause

    @max_pause.setter
    def max_pause(self, max_pause: float) -> None:
        _check_max_pause(max_pause)
        self._max_pause = max_pause

    @property
    def jitter(self) -> Callable[[], float]:
        """Where each backoff's jitter comes from (:func:`backoff`): a number
        in [0, 1] per call, ``random.random`` unless given (a constant makes
        a test's pauses exact); set it as it is given."""
        return self._jitter

    @jitter.setter
    def jitter(self, jitter: Callable[[], float]) -> None:
        _check_jitter(jitter)
        self._jitter = jitter

    def __repr__(self) -> str:
        return (
            f"<Upstream throttled={self.throttled} pauses={self.pauses} backoffs={self.backoffs} "
            f"malformed={self.malformed} ignored={self.ignored} "
            f"policies={sorted(self.policies)!r}>"
        )

    def learn(self, status: int, headers: Mapping[str, str]) -> float | None:
        """Apply what a response with ``status`` and ``headers`` (a
        case-insensitive mapping, httpx's, aiohttp's or requests', or a
        ``dict``, whose names are read in any case) says. If it paused the
        limiter, the seconds left of the pause in force (:meth:`pause_left`:
        an earlier one may outlast it); else ``None``. A ``status`` that is
        no ``int``, or ``headers`` that are no mapping of ``str`` names to
        ``str`` values, is refused naming it (``PermitTypeError``), before
        anything is counted or applied."""
        return self._learn(_checked_status(status), _checked_headers(headers))[0]

    def again(
        self,
        status: int,
        headers: Mapping[str, str],
        attempt: int,
        retries: int,
        timeout: float | None,
        *,
        cost: Cost = 1,
    ) -> bool:
        """Apply what a response to try ``attempt`` (from 0) of a request
        that asked for ``cost`` says, as :meth:`learn`, and whether the
        request is sent again (:func:`retry`: while tries are left, the
        pause in force within ``timeout``). A 429 or 503 that says no
        ``Retry-After`` (or none that parses) is sent again too: after the
        reset its rate-limit headers say, if they say nothing is left of a
        limit the request costs until one to come (the next permit waits
        for it); else after a :func:`backoff`, for which the whole limiter
        pauses, as for a ``Retry-After`` (the upstream's limit is every
        task's), unless the pause in force then outlasts ``timeout`` (then
        nothing pauses, nothing is counted, and the response is returned).
        One whose ``x-should-retry`` says ``false`` (the OpenAI and
        Anthropic APIs' word that another try cannot succeed: a quota used
        up) is learned from and returned, as with no try left. Arguments
        checked as :meth:`learn`'s, ``attempt`` and ``retries`` (``int >=
        0``), ``timeout`` (seconds ``>= 0``, or ``None``) and ``cost`` (as
        an acquire's: an ``int``, of every limit, or a mapping of limit
        names to ints), before anything is counted or applied."""
        status = _checked_status(status)
        headers = _checked_headers(headers)
        check_int("attempt", attempt, 0)
        check_int("retries", retries, 0)
        if timeout is not None:
            _nanoseconds("timeout", timeout)
        _check_cost(cost)
        paused, said, held = self._learn(status, headers)
        if _said_no_retry(headers):
            return False
        if said or status not in THROTTLED or attempt >= retries:
            return retry(paused, attempt, retries, timeout)
        if not any(_charges(cost, limit) for limit in held):
            seconds = min(backoff(attempt, self._draw()), self.max_pause)
            # decided first: a pause in force (another request's, longer)
            # may keep the retry past the timeout: then nothing is paused
            # for a retry that does not go, nor counted
            if not retry(max(seconds, self.limiter.pause_left()), attempt, retries, timeout):
                return False
            try:
                self.limiter.pause_for(seconds)
            except LimiterClosed:
                return False  # closed while the call was out: not sent again
            self._count("pauses")
            self._count("backoffs")
        return retry(self.limiter.pause_left(), attempt, retries, timeout)

    def _draw(self) -> float:
        """A draw of :attr:`jitter`, checked before anything pauses: a
        number from 0 to 1 (1 takes a quarter off, as ``random.random``
        never draws); one outside (a negative backoff, NaN, or one longer
        than its cap) refused naming ``jitter`` and the value drawn."""
        drawn = self.jitter()
        if isinstance(drawn, bool) or not isinstance(drawn, (int, float)):
            raise PermitTypeError("jitter", drawn, "a number in [0, 1] from each call")
        if not 0 <= drawn <= 1:
            raise PermitValueError("jitter", drawn, "must draw a number in [0, 1]")
        return drawn

    def _learn(
        self, status: int, headers: Mapping[str, str]
    ) -> tuple[float | None, bool, set[str]]:
        """:meth:`learn`'s pause; whether a ``Retry-After`` (or
        ``retry-after-ms``) said how long to wait; and the limits of which
        a rate-limit header said nothing is left until a reset to come (and
        the limiter took it). ``headers`` as :func:`_case_blind` gives them."""
        pause = None
        said = False
        held: set[str] = set()
        if status == 429:
            self._count("throttled")
        seconds = self._retry_after(headers) if status in THROTTLED else None
        if seconds is not None:
            said = True
            if seconds > self.max_pause:
                log.warning("Retry-After of %s s cut to max_pause=%s s", seconds, self.max_pause)
                seconds = self.max_pause
            try:
                self.limiter.pause_for(seconds)
            except LimiterClosed:
                pass  # closed while the call was out, as in _adopt: the response goes on
            except PermitValueError:
                # a pause the limiter cannot hold (a Redis limiter's: past
                # 1e9 s, with a max_pause past it), refused as it stands:
                # ignored as garbage is, as in _adopt; the response goes on
                self._count("malformed")
            else:
                self._count("pauses")
                pause = self.limiter.pause_left()
        for name in _x_ratelimit_names(headers):
            limit = self._limit_counting(name)
            remaining = headers.get(f"x-ratelimit-remaining-{name}")
            reset = headers.get(f"x-ratelimit-reset-{name}")
            refills = headers.get(f"x-ratelimit-limit-{name}", "")
            if limit is None:
                self._count("ignored")
            elif remaining is not None:  # (Azure OpenAI sends no reset)
                if self._adopt(remaining, reset, limit, refills=refills):
                    held.add(limit)
            elif _unread(reset, parse_duration) or _unread(refills, _whole_number):
                self._count("malformed")  # (alone, nothing to learn: but said wrong)
        field = headers.get("ratelimit-policy")
        if field is not None:
            self._learn_policies(field)
        field = headers.get("ratelimit")
        items = [] if field is None else _ratelimit_items(field)
        left = headers.get("ratelimit-remaining")
        reset = headers.get("ratelimit-reset")
        if left is not None:  # the draft to its 6th version: fields of their own
            items.append((None, left, reset))
        elif _unread(reset, parse_duration):
            self._count("malformed")  # (alone, nothing to learn: but said wrong)
        for policy, remaining, reset in items:
            known = None if policy is None else self.policies.get(policy)
            limit = self._limit_counting("requests" if known is None else known.unit)
            if remaining is None or reset is None:
                self._count("malformed")
            elif limit is None:
                self._count("ignored")
            elif self._adopt(remaining, reset, limit, refills=None):
                held.add(limit)
        return pause, said, held

    def _retry_after(self, headers: Mapping[str, str]) -> float | None:
        """The seconds a ``retry-after-ms`` (the OpenAI clients' header: a
        number of milliseconds) says, else a ``Retry-After``; ``None`` if
        neither is sent, or parses. One that does not parse is counted
        malformed."""
        if "retry-after-ms" in headers:
            milliseconds = _cautious(headers["retry-after-ms"], _delay_seconds, max)
            if milliseconds is not None:
                return milliseconds / 1000
            self._count("malformed")
        if "retry-after" not in headers:
            return None
        seconds, garbled = _retry_after(headers["retry-after"], time.time())
        if garbled:
            self._count("malformed")
        return seconds

    def _count(self, counter: str, n: int = 1) -> None:
        with self._lock:
            setattr(self, counter, getattr(self, counter) + n)

    def _limit_counting(self, unit: str) -> str | None:
        """The limit that counts ``unit``, the unit of an ``x-ratelimit-*-<unit>``
        pair or of a ``RateLimit`` item (``requests`` unless its policy
        says otherwise): the one of that name, in any case (``"Tokens"`` for
        ``tokens``); for ``requests``, the one limit ``units`` of a limiter
        opened with ``rate=``, which counts requests (a limit of anything
        else has a name: a limiter whose first limit is ``tokens`` must not
        take the requests left for tokens left); else none."""
        limits = self.limiter.limits
        unit = unit.lower()
        for limit in limits:
            if limit.lower() == unit:
                return limit
        return "units" if unit == "requests" and list(limits) == ["units"] else None

    def _learn_policies(self, field: str) -> None:
        """Remember the policies of a ``RateLimit-Policy`` field, and warn
        once about each that allows less than the limit counting its unit."""
        policies, malformed = _quota_policies(field)
        self._count("malformed", malformed)
        for name, policy in policies.items():
            with self._lock:  # two threads reading the same new policy: one warns
                policies = dict(self.policies)  # (a copy: see policies)
                known = policies.pop(name, None)
                policies[name] = policy  # (the latest named, last)
                if len(policies) > MAX_POLICIES:
                    del policies[next(iter(policies))]
                self.policies = policies
                if known == policy:
                    continue
            limit = self._limit_counting(policy.unit)
            if limit is None or not policy.window:
                continue
            rate = self.limiter.limits[limit].rate
            if policy.quota < rate * Fraction(policy.window):
                log.warning(
                    "the upstream's policy %r allows %s %s per %s s; limit %r allows more "
                    "(%s a second) and may meet 429s",
                    name,
                    policy.quota,
                    policy.unit,
                    policy.window,
                    limit,
                    float(rate),
                )

    def _adopt(self, remaining: str, reset: str | None, limit: str, *, refills: str | None) -> bool:
        """``remaining`` units of ``limit`` are left, and it is restored
        ``reset`` from now. The ``x-ratelimit-*`` headers (OpenAI's, and the
        like) are a bucket that ``refills`` (the text of its
        ``x-ratelimit-limit-*``: its size, ``""`` if not sent): that much
        is left now, and it is full again at the reset, refilling meanwhile
        (no reset sent, ``None``, as Azure OpenAI sends none: refilling from
        now at this limit's own rate, as a reset of 0 reads);
        the limit's bucket holds at most that now and is never fuller than
        the upstream's (so, refilling faster, it may hold nothing until
        near the reset). The IETF ``RateLimit`` field (``refills=None``) is
        a quota: that much until the reset, paced by the limit meanwhile
        (:meth:`~permits.adapters.BaseLimiter.quota`). Whether the limiter
        took it, and it said nothing is left until a reset to come."""
        seconds = 0.0 if reset is None else _cautious(reset, parse_duration, max)
        left = _cautious(remaining, _left, min)
        # a reset that is still finite in nanoseconds (the limiter's unit)
        if left is None or seconds is None or not math.isfinite(seconds * 1e9):
            self._count("malformed")
            return False
        if seconds > self.max_pause:
            # (nothing left until a reset that far off would hold every
            # request back that long, as a Retry-After: cut the same way;
            # said once, as a quota of a day's window comes on every response)
            with self._lock:
                said, self._cut_said = self._cut_said, True
            if not said:
                log.warning(
                    "a reset of %s s cut to max_pause=%s s (said once)", seconds, self.max_pause
                )
            seconds = self.max_pause
        try:
            if refills is None:
                self.limiter.quota(left, seconds, limit=limit)
            else:
                self._refill(left, seconds, limit, refills)
        except LimiterClosed:
            return False  # closed while the call was out: nothing to learn; the response goes on
        except PermitValueError:
            # a word the limiter cannot hold (a Redis limiter's: a reset past
            # 1e9 s), refused as it stands: ignored, as garbage is (of the
            # x-ratelimit-* bucket, what is left now may hold already)
            self._count("malformed")
            return False
        return left == 0 and seconds > 0

    def _refill(self, left: int, seconds: float, limit: str, refills: str) -> None:
        """The ``x-ratelimit-*`` headers' bucket (of the size ``refills``
        says), ``left`` now and full again ``seconds`` from now, adopted."""
        burst = self.limiter.limits[limit].burst
        size = _cautious(refills, _whole_number, min) if refills.strip() else burst  # not sent
        if size is None:
            self._count("malformed")
            size = burst
        if left >= burst:
            return  # more is left than this bucket holds: nothing to learn
        # At most `left` now, refilling from there at this bucket's rate,
        # and never fuller than the upstream's: a bigger one holds `burst`
        # units again once (burst - left) / (size - left) of its reset has
        # passed; a smaller one holds at most `size` at its reset. (The
        # fraction first: a size too big for a float gives it 0.0.)
        self.limiter.adopt(left, 0.0, limit=limit)
        if size > burst:
            self.limiter.adopt(burst, seconds * ((burst - left) / (size - left)), limit=limit)
        else:
            self.limiter.adopt(size, seconds, limit=limit)


def settle_in_time(permit: Permit, actual: Cost) -> None:
    """Settle ``permit`` at ``actual``, unless its response came after the
    limiter's ``settle_window``: then it keeps the cost it asked for, with
    a warning, and the response still goes to the caller (a slow call is
    not a failed one); or after the limiter closed (a shutdown while the
    call was out): nothing is left to settle, and the response still goes
    to the caller."""
    try:
        permit.settle(actual)
    except NotRefundable:
        log.warning(
            "a response came after the limiter's settle_window: its permit keeps "
            "the cost asked for (raise settle_window above the slowest call)"
        )
    except (PermitTypeError, PermitValueError) as error:
        if error.argument != "actual" and not error.argument.startswith("actual["):
            raise
        # named as the caller wrote it: settle, not actual (settle['tokens']
        # for an entry of the mapping it returned)
        raise error.renamed("settle" + error.argument.removeprefix("actual")) from None
    except LimiterClosed:
        pass


#: What a retry's acquire raises when its permit cannot come within the
#: integration's ``timeout`` (or cannot queue), or cannot come at all (the
#: limiter closed, a shutdown, as the retry waited): the response that was
#: to be sent again is returned instead, saying why, as one that comes
#: back after the limiter closed is.
LATE = (AcquireTimeout, WouldWaitTooLong, QueueFull, LimiterClosed)


def header_text(raw: bytes) -> str:
    """A header's value as the upstream's word is read: UTF-8 if it is,
    else Latin-1 (a reset's ``µs`` sent as one byte, 0xB5, read as UTF-8,
    was garbage). Each value on its own: one header not in UTF-8 leaves the
    others as they are."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def raise_if_broken(error: Exception) -> None:
    """Raise ``error`` on if it says the limiter broke (``LimiterClosed``
    with a cause: a fault, a policy's bug), which the caller must learn of,
    not that a retry's permit cannot come (:data:`LATE`)."""
    if isinstance(error, LimiterClosed) and error.cause is not None:
        raise error


def _checked_status(status: object) -> int:
    """A response's ``status``, checked: an ``int`` (not a ``bool``; a
    ``"429"`` was read as no 429)."""
    if isinstance(status, bool) or not isinstance(status, int):
        raise PermitTypeError("status", status, "an int (an HTTP status code)")
    return status


def _checked_headers(headers: object) -> Mapping[str, str]:
    """A response's ``headers``, checked (a mapping of ``str`` names to
    ``str`` values, a value at fault named by its entry), as
    :func:`_case_blind` gives them."""
    if not isinstance(headers, Mapping):
        raise PermitTypeError("headers", headers, "a mapping of header names to values (str)")
    for name, value in headers.items():
        if not isinstance(name, str):
            raise PermitTypeError("headers", headers, "a mapping whose header names are str")
        if not isinstance(value, str):
            raise PermitTypeError(f"headers[{name!r}]", value, "a str")
    return _case_blind(headers)


def _check_cost(cost: object) -> None:
    """A request's ``cost``, checked as an acquire reads it: an ``int``,
    or a mapping of limit names to ints ``>= 0`` (named by its entry), of
    at least one unit."""
    if isinstance(cost, Mapping):
        units = [check_int(f"cost[{name!r}]", n, 0) for name, n in cost.items()]
    elif isinstance(cost, bool) or not isinstance(cost, int):
        raise PermitTypeError("cost", cost, "an int, or a mapping of limit names to ints")
    else:
        units = [cost]
    if not any(n > 0 for n in units):
        raise PermitValueError("cost", cost, NO_UNIT)


def _charges(cost: Cost, limit: str) -> bool:
    """Whether ``cost`` takes units of ``limit`` (an ``int``, of every limit)."""
    return (cost if isinstance(cost, int) else cost.get(limit, 0)) > 0


def _case_blind(headers: Mapping[str, str]) -> Mapping[str, str]:
    """``headers`` as read here, by lower-case name: a ``dict`` (of names
    as the server wrote them, ``Retry-After``) with its names in lower
    case, a case-insensitive mapping as it is."""
    if isinstance(headers, dict):
        return {str(name).lower(): value for name, value in headers.items()}
    return headers


def _said_no_retry(headers: Mapping[str, str]) -> bool:
    """Whether the response's ``x-should-retry`` says ``false`` (any case,
    spaces around it; sent on several lines, any of them): the upstream's
    word that sending again cannot succeed, which the OpenAI and Anthropic
    clients heed before the status. (Its ``true`` adds nothing here: only a
    429 or 503 is sent again, and each is while tries are left.)"""
    value = headers.get("x-should-retry")
    return value is not None and "false" in (part.strip().lower() for part in value.split(","))


def _check_jitter(jitter: object) -> None:
    if not callable(jitter):
        raise PermitTypeError("jitter", jitter, "a function returning a number in [0, 1]")


def backoff(attempt: int, jitter: float) -> float:
    """Seconds to wait before sending again a request whose try ``attempt``
    (from 0) met a 429 or 503 that said no ``Retry-After``: :data:`BACKOFF`
    doubled each try, at most :data:`MAX_BACKOFF`, less up to a quarter by
    ``jitter`` (in [0, 1]: 0 takes it whole), so that clients turned away
    together do not all come back together (as the OpenAI and Anthropic
    clients wait)."""
    return min(MAX_BACKOFF, BACKOFF * 2.0 ** min(attempt, 64)) * (1 - 0.25 * jitter)


def retry(paused: float | None, attempt: int, retries: int, timeout: float | None) -> bool:
    """Whether a response that paused the limiter (``paused``: the seconds
    left of the pause in force; ``None``: it did not pause it) on try
    ``attempt`` (from 0) is sent again: while tries are left, and only if
    the pause ends before the ``timeout`` a permit is waited for ends (else
    the next try could only time out, even one whose permit would come at
    the instant its wait ends, and the response that says why would be
    lost); a pause over already, with any ``timeout``."""
    if paused is None or attempt >= retries:
        return False
    return timeout is None or paused < timeout or paused == 0


def check_options(
    retries: int, max_pause: float, timeout: float | None, **functions: object
) -> None:
    """An integration's ``retries`` (an ``int >= 0``), ``max_pause`` (a
    finite number of seconds ``> 0``), ``timeout`` (seconds ``>= 0``, or
    ``None``) and ``functions`` (``level``, ``flow``, ``cost``, ``settle``:
    each callable or ``None``, and called, not awaited: an ``async def``
    is refused), checked; refused now, not once a request has gone out
    (an ``async def settle`` once the upstream had served it)."""
    for argument, function in functions.items():
        if function is None:
            continue
        if not callable(function):
            raise PermitTypeError(argument, function, "a function, or None")
        if inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
            type(function).__call__  # (an object whose __call__ is an async def)
        ):
            raise PermitTypeError(
                argument,
                function,
                "a plain function (called, not awaited), or None",
                got="an async function",
            )
    check_int("retries", retries, 0)
    _check_max_pause(max_pause)
    if timeout is not None:
        _nanoseconds("timeout", timeout)  # as acquire checks it


def check_settle(limiter: _Limiting, settle: object) -> None:
    """``settle`` (a function, or ``None``), checked against ``limiter``:
    settling needs a limiter opened with a ``settle_window``; refused now,
    not after a request the upstream has charged for. (The window as
    given: a Redis limiter's machine keeps its ``refund_window`` as its
    ``settle_window_ns``.)"""
    if settle is not None and not limiter._settle_window:
        raise PermitValueError("settle", settle, "needs a limiter opened with settle_window > 0")


def _check_max_pause(max_pause: float) -> None:
    """``max_pause``, checked: a number of seconds (``PermitTypeError``
    otherwise, as for ``timeout``), ``> 0`` and finite in nanoseconds too
    (as :meth:`~permits.adapters.BaseLimiter.pause_for` takes it: a longer
    one made a Retry-After that long raise)."""
    if isinstance(max_pause, bool) or not isinstance(max_pause, (int, float)):
        raise PermitTypeError("max_pause", max_pause, "a number of seconds")
    if not 0 < max_pause < math.inf or _nanoseconds("max_pause", max_pause) is None:
        raise PermitValueError(
            "max_pause", max_pause, "must be a finite number of seconds > 0 (at most about 1e299)"
        )
