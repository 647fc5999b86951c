"""A real ``redis-server`` for the tests: loopback, a free port, a temporary
directory, persistence off; started and stopped by the tests themselves.

No fake Redis: what the server decides (the GCRA script, its clock, expiry)
is decided by the real one.

A server dies with the process that started it, however that process ends
(SIGKILL included): each server starts through :data:`LEASH`, whose
watchdog kills it once the pipe from the starting process closes.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

__all__ = ["LEASH", "RedisCluster", "RedisServer", "need_redis_cli", "need_redis_server"]

#: ``python -c LEASH command...``: run ``command`` in this very process (its
#: pid is the server's), watched by a detached watchdog that kills it once
#: standard input (a pipe whose only write end the starting process holds)
#: reaches its end: the starting process closed it, or died. The watchdog
#: holds a pidfd of this process, so it never signals a reused pid, and it
#: leaves when the server ends. It runs in a session of its own, away from
#: the terminal's Ctrl-C and the job's signals, and is no child of the
#: server (a double fork). No ``PR_SET_PDEATHSIG``: that fires when the
#: starting *thread* ends, and servers start from worker threads too.
LEASH = """
import os, select, signal, sys
if hasattr(os, "pidfd_open"):  # (Linux; elsewhere the server runs unwatched)
    me = os.pidfd_open(os.getpid())
    if os.fork() == 0:
        if os.fork() == 0:
            os.setsid()
            ready, _, _ = select.select([0, me], [], [])
            if 0 in ready:
                try:
                    signal.pidfd_send_signal(me, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        os._exit(0)
    os.wait()
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
os.execvp(sys.argv[1], sys.argv[1:])
"""


def need_redis_server() -> str:
    """The ``redis-server`` binary, or skip (fail, when ``PERMITS_REQUIRE_REDIS``
    is set, as ``.ci/run`` does: CI must not skip these silently)."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("PERMITS_REQUIRE_REDIS"):
            pytest.fail("redis-server is not installed (apt-get install redis-server)")
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    return binary


def need_redis_cli() -> str:
    """The ``redis-cli`` binary (for a cluster), or skip, as :func:`need_redis_server`."""
    binary = shutil.which("redis-cli")
    if binary is None:
        if os.environ.get("PERMITS_REQUIRE_REDIS"):
            pytest.fail("redis-cli is not installed (it comes with redis-server)")
        pytest.skip("redis-cli is not installed (it comes with redis-server)")
    return binary


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cluster_port() -> int:
    """A free port whose cluster bus port (``port + 10000``) is free too."""
    while True:
        port = free_port()
        if port + 10000 > 65535:
            continue
        try:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        return port


class RedisServer:
    """One ``redis-server`` process; :meth:`kill` and :meth:`start` again keep
    the port, as a restarted server would. ``under``: a command to run it
    under (the benchmarks' ``valgrind --tool=callgrind ...``)."""

    def __init__(
        self, binary: str, *options: str, port: int | None = None, under: Sequence[str] = ()
    ) -> None:
        self.binary = binary
        self.options = options
        self.under = tuple(under)
        self.port = free_port() if port is None else port
        #: Whether the port may change before the first start (it was only
        #: free when chosen: another process may take it first).
        self._any_port = port is None
        self.dir = Path(tempfile.mkdtemp(prefix="permits-redis-"))
        self.process: subprocess.Popen[bytes] | None = None
        #: The write end of the process's leash (:data:`LEASH`): closing it
        #: kills the server; so does this process's death.
        self._leash: int | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def version(self) -> str:
        """The server's version, as ``redis-server --version`` prints it
        (``v=7.0.15``)."""
        out = subprocess.run([self.binary, "--version"], capture_output=True, text=True, check=True)
        return out.stdout.split()[2]

    def start(self) -> None:
        """Start the server and wait until it answers. A port of our own
        choosing that another process took first (the server exits at once)
        is chosen again, before the first start only."""
        for _ in range(5):
            if self._start_once():
                self._any_port = False
                return
            self.port = free_port()
        raise RuntimeError(f"redis-server did not start on five free ports (last {self.port})")

    def _start_once(self) -> bool:
        """Start the server on its port: ``True`` once it answers, ``False``
        if it exited first on a port we may change."""
        assert self.process is None
        leash, self._leash = os.pipe()
        try:
            self.process = self._popen(leash)
        except BaseException:
            self._unleash()
            raise
        finally:
            os.close(leash)
        # (valgrind starts slowly; a busy host too)
        deadline = time.monotonic() + (60 if self.under else 30)
        while time.monotonic() < deadline:
            if self.process.poll() is not None:  # it exited: the port was taken
                self._unleash()
                if self._any_port:
                    return False
                raise RuntimeError(f"redis-server exited at start on port {self.port} (taken?)")
            if self._answers():
                return True
            time.sleep(0.02)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def _popen(self, leash: int) -> subprocess.Popen[bytes]:
        """The server's process, on its leash: ``leash`` is the read end
        of the pipe whose write end is ``self._leash``."""
        return subprocess.Popen(
            [
                sys.executable, "-I", "-S", "-c", LEASH,
                *self.under,
                self.binary,
                "--port", str(self.port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(self.dir),
                "--daemonize", "no",
                "--loglevel", "warning",
                *self.options,
            ],
            stdin=leash,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def _answers(self) -> bool:
        """Whether this server (not another one that took the port) answers:
        ``INFO server`` names its process, or a password is asked (which a
        server of these tests asks only when told to)."""
        assert self.process is not None
        reply = b""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                conn.sendall(b"INFO server\r\n")
                conn.settimeout(5)
                while not re.search(rb"\r\nprocess_id:\d+\r\n", reply):
                    if reply.startswith(b"-NOAUTH"):
                        return True
                    more = conn.recv(4096)
                    if not more:
                        return False
                    reply += more
        except OSError:
            return False
        found = re.search(rb"\r\nprocess_id:(\d+)\r\n", reply)
        assert found is not None
        return int(found.group(1)) == self.process.pid

    def kill(self) -> None:
        """Stop the server at once (SIGKILL): its data is gone, as in a crash."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self._unleash()

    def _unleash(self) -> None:
        """Forget the process (it has ended) and close its leash (its
        watchdog has left, or leaves now)."""
        self.process = None
        if self._leash is not None:
            os.close(self._leash)
            self._leash = None

    def shutdown(self) -> None:
        """Stop the server cleanly (``SHUTDOWN NOSAVE``) and wait for it to
        exit: a command it runs under (callgrind) writes its results."""
        assert self.process is not None
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as conn:
            conn.sendall(b"SHUTDOWN NOSAVE\r\n")
            conn.recv(16)  # the connection closes as the server exits
        self.process.wait(timeout=60)
        self._unleash()

    def hang(self) -> None:
        """Freeze the server (SIGSTOP): connections stay open, nothing is
        answered, as in a hung host."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Let a hung server run again (SIGCONT)."""
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisCluster:
    """A real Redis Cluster of three masters on loopback, each its own
    ``redis-server --cluster-enabled yes``, joined by ``redis-cli --cluster
    create``; :meth:`stop` ends them all."""

    def __init__(self, binary: str) -> None:
        options = ("--cluster-enabled", "yes", "--cluster-node-timeout", "5000")
        self.servers = [RedisServer(binary, *options, port=cluster_port()) for _ in range(3)]

    @property
    def url(self) -> str:
        return self.servers[0].url

    def start(self) -> None:
        for server in self.servers:
            server.start()
        cli = need_redis_cli()
        nodes = [f"127.0.0.1:{server.port}" for server in self.servers]
        subprocess.run(
            [cli, "--cluster", "create", *nodes, "--cluster-replicas", "0", "--cluster-yes"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            states = [
                subprocess.run(
                    [cli, "-p", str(server.port), "cluster", "info"],
                    capture_output=True,
                    text=True,
                ).stdout
                for server in self.servers
            ]
            if all("cluster_state:ok" in state for state in states):
                return
            time.sleep(0.1)
        raise RuntimeError("the Redis Cluster did not come up")

    def stop(self) -> None:
        for server in self.servers:
            server.stop()
