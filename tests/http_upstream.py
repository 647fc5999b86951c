"""A real HTTP server on loopback that enforces its own token bucket, for
the HTTP integrations' tests: it answers 429 with ``Retry-After`` when the
bucket is empty, and sends ``x-ratelimit-remaining/reset-requests`` and a
JSON body with ``usage.total_tokens`` otherwise. It runs in a thread of the
test process (``http.server``); requests go through a real socket."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Upstream_:
    """The server's own limit: a token bucket of ``burst`` at ``rate``/s."""

    def __init__(self, rate: float, burst: int, retry_after: str = "1") -> None:
        self.rate, self.burst, self.retry_after = rate, burst, retry_after
        self.tokens = float(burst)
        self.then = time.monotonic()
        self.lock = threading.Lock()
        self.served = 0
        self.rejected = 0

    def take(self) -> tuple[bool, float]:
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.then) * self.rate)
            self.then = now
            if self.tokens >= 1:
                self.tokens -= 1
                self.served += 1
                return True, self.tokens
            self.rejected += 1
            return False, self.tokens


@contextmanager
def serve(limit: Upstream_) -> Iterator[str]:
    """Serve on a free loopback port while the block runs; its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.answer()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.answer()

        def answer(self) -> None:
            ok, left = limit.take()
            if not ok:
                self.send_response(429)
                self.send_header("Retry-After", limit.retry_after)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = json.dumps({"usage": {"total_tokens": 7}}).encode()
            self.send_response(200)
            self.send_header("x-ratelimit-remaining-requests", str(int(left)))
            reset = (limit.burst - left) / limit.rate
            self.send_header("x-ratelimit-reset-requests", f"{reset:.3f}s")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with _serving(Handler) as url:
        yield url


class Script:
    """A server that answers each request with the next of ``answers``
    (``(status, headers)``, a header's value a list to send it on several
    lines; the last one again once they run out), and
    keeps the bodies it was sent; each answer ``delay`` seconds late, its
    body ``content`` (as it goes on the wire: gzipped, if the answer's
    headers say so)."""

    def __init__(
        self,
        *answers: tuple[int, Mapping[str, str | list[str]]],
        delay: float = 0.0,
        content: bytes = b'{"ok": true}',
    ) -> None:
        self.answers = list(answers)
        self.delay = delay  # seconds before each answer
        self.content = content
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()

    def next(self, body: bytes) -> tuple[int, Mapping[str, str | list[str]]]:
        with self.lock:
            self.bodies.append(body)
            return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


@contextmanager
def serve_script(script: Script) -> Iterator[str]:
    """Serve ``script`` on a free loopback port while the block runs; its URL.
    Header values are sent as Latin-1 bytes, as a server may send them."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.answer(b"")

        def do_POST(self) -> None:
            if self.headers.get("Transfer-Encoding") == "chunked":
                body = b""
                while size := int(self.rfile.readline().strip(), 16):
                    body += self.rfile.read(size)
                    self.rfile.readline()
                self.rfile.readline()
            else:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.answer(body)

        def answer(self, body: bytes) -> None:
            status, headers = script.next(body)
            time.sleep(script.delay)
            content = script.content
            self.send_response(status)
            for name, value in headers.items():
                for line in [value] if isinstance(value, str) else value:
                    self.send_header(name, line)  # a list: the field on several lines
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with _serving(Handler) as url:
        yield url


class Parts:
    """A server that answers each request with a chunked body in two
    parts: ``first`` at once, then ``last`` once :attr:`go` is set (or
    after ``wait`` seconds: :attr:`waited_out` says so), as a streamed
    response (an LLM's tokens, an event stream) comes."""

    def __init__(self, first: bytes, last: bytes, wait: float = 5.0) -> None:
        self.first, self.last, self.wait = first, last, wait
        self.go = threading.Event()
        self.waited_out = False


@contextmanager
def serve_parts(parts: Parts) -> Iterator[str]:
    """Serve ``parts`` on a free loopback port while the block runs; its URL."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.chunk(parts.first)
            if not parts.go.wait(parts.wait):
                parts.waited_out = True
            with contextlib.suppress(OSError):  # the client may have closed it
                self.chunk(parts.last)
                self.chunk(b"")

        def chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with _serving(Handler) as url:
        yield url


class Hangup:
    """A server that reads each request whole and then closes the
    connection without answering (a crash, a proxy's reset): the request
    reached it, no response came. :attr:`bodies` are those it read."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.lock = threading.Lock()


@contextmanager
def serve_hangup(hangup: Hangup) -> Iterator[str]:
    """Serve ``hangup`` on a free loopback port while the block runs; its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.hang_up(b"")

        def do_POST(self) -> None:
            self.hang_up(self.rfile.read(int(self.headers.get("Content-Length", 0))))

        def hang_up(self, body: bytes) -> None:
            with hangup.lock:
                hangup.bodies.append(body)
            self.close_connection = True  # no status line, no headers

        def log_message(self, format: str, *args: Any) -> None:
            pass

    with _serving(Handler) as url:
        yield url


def closed_port() -> str:
    """The URL of a loopback port nothing listens on (a refused connection)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/"


@contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Serve with ``handler`` on a free loopback port, in a thread, while
    the block runs; its URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
