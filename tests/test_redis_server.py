"""The tests' own redis-servers (properties/redis_server.py) die with the
process that started them, however it ends: a killed test run leaves no
server behind. Real processes and the real clock, with generous margins."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from redis_server import LEASH, RedisServer, need_redis_server

pytestmark = pytest.mark.skipif(
    not hasattr(os, "pidfd_open"), reason="the servers' watchdog needs pidfds (Linux)"
)

#: How long a server or its watchdog may take to leave, on a loaded host.
MARGIN = 30.0

#: A test run in miniature: start a server as the suite does (from the
#: main thread, or from a worker thread that then ends), say its pid and
#: port, then wait to be killed.
STARTER = """
import sys, threading, time
from redis_server import RedisServer
server = RedisServer(sys.argv[1])
if sys.argv[2] == "worker-thread":
    worker = threading.Thread(target=server.start)
    worker.start()
    worker.join()
else:
    server.start()
print(server.process.pid, server.port, flush=True)
time.sleep(3600)
"""


def answers(port: int) -> bool:
    """Whether a server on ``port`` answers ``PING``."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16) == b"+PONG\r\n"
    except OSError:
        return False


def ended(pidfd: int, within: float = MARGIN) -> bool:
    """Whether the process of ``pidfd`` ends within ``within`` seconds (a
    pidfd reads ready once its process has ended, reaped or not)."""
    ready, _, _ = select.select([pidfd], [], [], within)
    return bool(ready)


def watchdogs(port: int) -> list[int]:
    """The pids of the watchdogs (:data:`LEASH`) of servers on ``port``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().decode().split("\0")
        except (OSError, ValueError):
            continue
        if argv[:5] == [sys.executable, "-I", "-S", "-c", LEASH] and f"--port\0{port}\0" in (
            "\0".join(argv)
        ):
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("thread", ["main-thread", "worker-thread"])
def test_a_server_dies_with_the_process_that_started_it(thread: str) -> None:
    """SIGKILL the process that started a server (no teardown runs): the
    server ends too, within the margin. Started from a worker thread, it
    outlives that thread (no ``PR_SET_PDEATHSIG``), not the process."""
    properties = Path(__file__).resolve().parents[1] / "properties"
    env = {**os.environ, "PYTHONPATH": str(properties)}
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, need_redis_server(), thread],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    assert starter.stdout is not None
    server = None
    try:
        pid, port = map(int, starter.stdout.readline().split())
        # the starter lives and has not reaped it: the pid is the server's
        server = os.pidfd_open(pid)
        assert not ended(server, within=1), "the server ended with its starter alive"
        assert answers(port), port
        starter.kill()
        starter.wait()
        gone = ended(server)
        if not gone:  # leave nothing behind, even so
            signal.pidfd_send_signal(server, signal.SIGKILL)
        assert gone, f"redis-server {pid} outlived its starter by {MARGIN} s"
    finally:
        starter.kill()
        starter.wait()
        starter.stdout.close()
        if server is not None:
            os.close(server)


def shut_down_by_a_client(server: RedisServer) -> None:
    """``SHUTDOWN NOSAVE`` from a client: the server ends while its starter
    still holds the leash."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as conn:
        conn.sendall(b"SHUTDOWN NOSAVE\r\n")
        conn.recv(16)


@pytest.mark.parametrize("stop", ["kill", "shutdown", "by-a-client"])
def test_the_watchdog_leaves_with_its_server(stop: str) -> None:
    """Each server has one watchdog while it runs, and none once it ends:
    stopped as the tests stop it (``kill()``, ``shutdown()``), or ended
    while its starter lives on and holds the leash."""
    server = RedisServer(need_redis_server())
    server.start()
    try:
        dogs = watchdogs(server.port)
        assert len(dogs) == 1, dogs
        dog = os.pidfd_open(dogs[0])
        try:
            if stop == "by-a-client":
                shut_down_by_a_client(server)
            else:
                getattr(server, stop)()
            assert ended(dog), dogs
        finally:
            os.close(dog)
    finally:
        server.stop()
