"""Hypothesis profiles, chosen by the HYPOTHESIS_PROFILE environment variable.

- ``dev`` (the default): quick, randomised.
- ``ci``: derandomised (the same examples every run), no example database,
  more examples; ``.ci/run`` uses it.
- ``nightly``: five times ``ci``'s examples and four times its stateful
  steps, randomised, for a run of ``properties/`` of about half an hour on
  two cores (README.md gives the figure); each test may run for
  up to ``NIGHTLY_TIMEOUT`` (pyproject.toml's 300 s is for the other
  profiles). Its cost is examples times steps times the reference's work
  a step, which grows with the steps taken: 5,000 examples of 200 steps
  did not finish the first test of ``test_machine.py`` in 30 minutes.
- ``mutants``: ``ci`` without shrinking, for ``properties/mutants.py``, which
  only needs to know that (and which property) fails.
- ``mutation``: fast and deterministic, for ``.ci/mutation`` (mutmut), which
  runs the core properties once per mutant: few examples and short stateful
  runs, derandomised, no example database, no shrinking, no deadline.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings

from redis_server import RedisServer, need_redis_server

settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile(
    "ci",
    max_examples=200,
    derandomize=True,
    database=None,
    print_blob=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "nightly",
    max_examples=1_000,
    stateful_step_count=200,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "mutants",
    parent=settings.get_profile("ci"),
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
settings.register_profile(
    "mutation",
    max_examples=10,
    stateful_step_count=30,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
settings.load_profile(PROFILE)

#: pytest-timeout's limit per test under ``nightly``, where a stateful test
#: runs for minutes: the 300 s of pyproject.toml would stop it midway,
#: and Hypothesis would report the timeout as a flaky failure.
NIGHTLY_TIMEOUT = 3600


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Under ``nightly``, give each test ``NIGHTLY_TIMEOUT`` seconds, unless
    ``--timeout`` or ``PYTEST_TIMEOUT`` says otherwise (runs before
    pytest-timeout reads its settings)."""
    if (
        PROFILE == "nightly"
        and config.getoption("timeout", None) is None
        and "PYTEST_TIMEOUT" not in os.environ
    ):
        config.option.timeout = NIGHTLY_TIMEOUT


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A real redis-server for the session (skipped where none is installed,
    except under ``PERMITS_REQUIRE_REDIS``, as in CI)."""
    server = RedisServer(need_redis_server())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def client(redis_server: RedisServer) -> Iterator[Any]:
    """A redis-py client of the session's redis-server (for the shared
    limit's properties, which run its script themselves)."""
    import redis

    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


@pytest.fixture(scope="module")
def script(client: Any) -> Any:
    """The shared limit's script on :func:`client`, its clock an argument
    (``script_source(clock="argv")``), for calls at times a test chooses."""
    from permits.adapters.redis import script_source

    return client.register_script(script_source(clock="argv"))
