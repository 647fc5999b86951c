"""What an adapter requires around it: its optional dependency, its framework.

Both fail once, at a boundary (the import; the first clock reading outside
the framework), and both would otherwise surface as another library's words
(``No module named 'trio'``, ``no running event loop``). Here they name what
to install, or which adapter to use instead.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Literal

from permits.core import PermitError

__all__ = ["WrongFramework", "other_loop", "requires_extra", "wrong_framework"]


@contextmanager
def requires_extra(module: str, extra: str, *packages: str) -> Iterator[None]:
    """Import, in the ``with`` block, what ``module`` needs from the extra
    ``permits[extra]``: one of the top-level ``packages`` missing is a
    ``ModuleNotFoundError`` (``name`` set) that says what to install::

        with requires_extra(__name__, "trio", "trio"):
            import trio

    Any other import error (one inside an installed package) goes on
    unchanged.
    """
    try:
        yield
    except ModuleNotFoundError as error:
        missing = (error.name or "").partition(".")[0]
        if missing not in packages:
            raise
        raise ModuleNotFoundError(
            f"{module} needs {missing}: pip install 'permits[{extra}]'", name=missing
        ) from None


#: What an adapter needs: an event loop of asyncio, of trio, or of either
#: (``"anyio"``: the anyio adapter's).
Framework = Literal["asyncio", "trio", "anyio"]

#: The adapters to use under each framework.
_USE: dict[Framework, str] = {
    "asyncio": "permits.adapters.asyncio.open_limiter or permits.adapters.anyio.open_limiter",
    "trio": "permits.adapters.trio.open_limiter or permits.adapters.anyio.open_limiter",
}

#: How a worker thread calls into each framework's loop.
_FROM_THREAD: dict[Framework, str] = {
    "asyncio": "asyncio.run_coroutine_threadsafe or loop.call_soon_threadsafe",
    "trio": "anyio.from_thread.run_sync or trio.from_thread.run_sync",
    "anyio": "anyio.from_thread.run or anyio.from_thread.run_sync",
}


class WrongFramework(PermitError, RuntimeError):
    """An adapter was used outside the framework it is for: the asyncio
    ``Limiter`` under trio, trio's ``open_limiter`` under asyncio, or either
    where no event loop runs. The message names the adapter to use instead.

    :ivar adapter: what was used, e.g. ``"permits.adapters.asyncio.Limiter"``.
    :ivar needs: the framework it needs (``"asyncio"``, ``"trio"``, or
        ``"anyio"``: either, through anyio).
    :ivar running: the framework running instead, or ``None`` if none is.
    """

    def __init__(
        self, adapter: str, needs: Framework, running: Framework | None, *, bound: bool = False
    ) -> None:
        self.adapter = adapter
        self.needs = needs
        self.running = running
        if running is None and bound:
            # A limiter that lives in a loop already, called from a worker
            # thread: a loop started there would be refused as another's.
            super().__init__(
                f"{adapter} belongs to the {needs} event loop it was first used in, and none "
                f"runs in this thread: call it in that loop (from a worker thread, through "
                f"{_FROM_THREAD[needs]})"
            )
            return
        if running is None:
            advice = f"none runs in this thread (start one with {needs}.run)"
        else:
            advice = f"under {running} use {_USE[running]}"
        loop = "asyncio or trio event loop" if needs == "anyio" else f"{needs} event loop"
        super().__init__(f"{adapter} needs a running {loop}; {advice}")


def running_framework() -> Framework | None:
    """The framework running in this thread, if asyncio or trio (asked only
    once the one an adapter needs was found missing; neither is imported for
    the asking)."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            return "asyncio"
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_trio_token()
        except RuntimeError:
            pass
        else:
            return "trio"
    return None


def wrong_framework(
    adapter: Callable[..., Any], needs: Framework, *, bound: bool = False
) -> WrongFramework:
    """The error for ``adapter`` (a class or function) used outside ``needs``
    (``bound``: a limiter that lives in a loop of it already); raise it
    ``from None`` where the framework's own call failed."""
    name = f"{adapter.__module__}.{adapter.__qualname__}"
    return WrongFramework(name, needs, running_framework(), bound=bound)


def other_loop(adapter: Callable[..., Any]) -> RuntimeError:
    """The error for a limiter of ``adapter`` (its class) used in an event
    loop other than its own: another thread's loop, or another trio run,
    whose clock and tasks it does not share (it would wake nobody there,
    and read another clock)."""
    return RuntimeError(
        f"a {adapter.__module__}.{adapter.__qualname__} belongs to the event loop it was "
        "first used in, not this one: open a limiter in each loop, or call this one "
        "from its own loop's thread"
    )
