"""permits: permits under one shared rate limit, handed out by priority.

Pure, no clock, no sleeping, no I/O (time is an argument):

- :mod:`permits.core`: the state machine and its policies (``Machine``,
  ``Fifo``, ``StrictPriority``, ``Shares``, ``Aging``);
- :mod:`permits.sim`: scenarios played in virtual time on the core.

Touching clocks, frameworks and the outside world:

- :mod:`permits.adapters`: limiters for asyncio, trio, anyio and threads,
  one limit shared through Redis, and the Prometheus and OpenTelemetry
  exports;
- :mod:`permits.httpx` and :mod:`permits.aiohttp`: HTTP clients that take
  a permit per request and learn from the upstream's answers;
- :mod:`permits.testing`: virtual time for the tests of a user's code;
- :mod:`permits.cli`: the ``permits`` command (``python -m permits``).

This file is the one ``__init__.py`` of ``permits``, whose subpackages live in
two source roots (``core/`` and ``adapters/``); ``extend_path`` joins them.
"""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

__all__ = ["__version__"]

#: The distribution's version (pyproject.toml reads it from here).
__version__ = "0.1.0"
