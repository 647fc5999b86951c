"""A live limiter's calls, recorded as a trace that ``permits simulate
--trace`` and ``permits compare --trace`` replay (see :meth:`record`)."""

from __future__ import annotations

import errno
import io
import os
import shutil
import stat
import threading
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import IO

from permits.core import PermitTypeError
from permits.sim import Call, trace_lines

__all__ = ["Recording"]


class Recording:
    """The calls a limiter took from its :meth:`~permits.adapters.BaseLimiter.record`
    on: each acquire's (and try_acquire's) time from the start of the
    recording, level, cost (as it was asked: units of every limit, or per
    limit), flow, timeout and ``max_wait`` (an acquire refused for its
    ``max_wait`` included), and for a caller that gave up waiting (cancelled,
    or still waiting as the limiter closed) how long it waited
    (``give_up_after``). At most ``max_calls`` are kept; the calls
    after them are counted in :attr:`dropped`, not kept. ``limits`` names
    the limiter's limits, in order."""

    def __init__(
        self,
        start_ns: int,
        max_calls: int,
        limits: tuple[str, ...],
        previous: Recording | None = None,
    ) -> None:
        self.start_ns = start_ns
        self.max_calls = max_calls
        self.limits = limits
        self.calls: list[Call] = []
        #: Calls made after ``max_calls`` were kept, or after :meth:`stop`.
        self.dropped: int = 0
        self.stopped: bool = False
        #: The index of each call kept that is still waiting, by its id.
        self._waiting: dict[int, int] = {}
        while previous is not None and not previous._waiting:
            previous = previous._previous  # (nobody waits in it: skipped)
        #: The latest recording before this one whose calls still wait: told
        #: how they end (a limiter's ids are never used twice).
        self._previous: Recording | None = previous

    def __repr__(self) -> str:
        stopped = " stopped" if self.stopped else ""
        return (
            f"<Recording calls={len(self.calls)} dropped={self.dropped} "
            f"max_calls={self.max_calls} limits={self.limits!r}{stopped}>"
        )

    def add(
        self,
        now: int,
        level: int,
        cost: int | Mapping[str, int],
        flow: Hashable,
        timeout_ns: int | None,
        max_wait_ns: int | None = None,
        waiting: int | None = None,
    ) -> None:
        """A call at ``now``; ``waiting``: its id, if it waits (it may give up:
        :meth:`gave_up`)."""
        if now < self.start_ns:
            # Under way when the recording started (another thread's call,
            # its clock read first): not one of its calls.
            return
        if self.stopped or len(self.calls) >= self.max_calls:
            self.dropped += 1
            return
        if not isinstance(cost, int):
            # A copy (the caller may change its mapping); with one limit, one number.
            cost = dict(cost) if len(self.limits) > 1 else cost.get(self.limits[0], 0)
        if waiting is not None:
            self._waiting[waiting] = len(self.calls)
        self.calls.append(
            Call(now - self.start_ns, level, cost, flow, timeout_ns, max_wait_ns=max_wait_ns)
        )

    def gave_up(self, id: int, now: int) -> None:
        """The waiting call ``id`` stopped waiting at ``now`` (cancelled; or
        granted then, and cancelled before it ran): in a replay it gives up
        after as long as it waited (``give_up_after``)."""
        index = self._waiting.pop(id, None)
        if index is not None:
            call = self.calls[index]
            waited = now - self.start_ns - call.at_ns
            self.calls[index] = call._replace(give_up_after_ns=waited)
        elif self._previous is not None:
            self._previous.gave_up(id, now)
            self._forget_previous()

    def decided(self, id: int) -> None:
        """The waiting call ``id`` was decided: it stays as it is."""
        if self._waiting.pop(id, None) is None and self._previous is not None:
            self._previous.decided(id)
            self._forget_previous()

    def _forget_previous(self) -> None:
        """Let the previous recording go once none of its calls waits."""
        previous = self._previous
        if previous is not None and not previous._waiting:
            self._previous = previous._previous

    def stop(self) -> None:
        """Keep no more calls from now on."""
        self.stopped = True

    def write(self, target: str | os.PathLike[str] | IO[str]) -> None:
        """Write the calls kept as a CSV trace to a path or an open text
        file: with several limits, a ``cost.<limit>`` column for each. A
        path is written whole or not at all (a file beside it, renamed over
        it once complete, with the permissions the file had), so a crash
        mid-write leaves no truncated trace; one that exists and is no
        regular file (a named pipe, ``/dev/stdout``) is written into, as
        ``open()`` would, and left as it is."""
        if isinstance(target, (str, os.PathLike)):
            place = os.fspath(target)
            if not isinstance(place, str):  # (a PathLike of bytes)
                raise PermitTypeError("target", target, "a path (str or Path) or an open text file")
        elif not callable(getattr(target, "writelines", None)):
            raise PermitTypeError("target", target, "a path (str or Path) or an open text file")
        elif isinstance(target, (io.RawIOBase, io.BufferedIOBase)):
            raise PermitTypeError(
                "target",
                target,
                "a path or a file open for text, open(path, 'w', newline=''), not in binary",
            )
        lines = trace_lines(self.calls, self.limits if len(self.limits) > 1 else None)
        if not isinstance(target, (str, os.PathLike)):
            target.writelines(lines)
            return
        try:
            mode = os.stat(place).st_mode
        except OSError:  # none yet (or none to reach: said below, naming the path)
            mode = stat.S_IFREG
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            # A pipe, a terminal, /dev/null: nothing to replace, and the file
            # beside it, renamed over it, would put a regular file in its place.
            with open(place, "w", encoding="utf-8", newline="") as file:
                file.writelines(lines)
            return
        path = Path(place).resolve()  # a link's file is written, the link kept
        if path.is_dir():  # (its file beside it would be one level up)
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), place)
        partial = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.partial")
        try:
            with open(partial, "w", encoding="utf-8", newline="") as file:
                file.writelines(lines)
            if path.exists():
                shutil.copymode(path, partial)  # the file keeps its permissions
            os.replace(partial, path)
        except BaseException as error:
            partial.unlink(missing_ok=True)
            if isinstance(error, OSError) and error.filename == str(partial):
                # named by the path given, not by the file written first
                raise type(error)(error.errno, error.strerror, place) from None
            raise
