"""
A loopback HTTP server that speaks the providers' protocols from recorded fixtures (issue 14 "Proof").

A real socket on 127.0.0.1 (stdlib ``http.server`` in a thread): the real SDK clients are pointed at it by
``base_url``. Each scripted reply is a fixture file under ``tests/adapters/data/``:
``{"request": {"path": ..., "body": ...}, "response": {"status": ..., "json": ...} | {"status": ..., "sse":
"<file>.sse"}}``; SSE files are the raw event stream as the provider sends it. Every request received is
recorded (path, headers, decoded JSON body) for the tests to assert against the fixture.

``hold_after`` (number of SSE events) makes the server stop mid-stream until :meth:`release`: tests wait on
:attr:`holding` (a state, not a sleep) before they abort or cancel.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


DATA = Path(__file__).parent / "data"


def load_fixture(name: str) -> dict[str, Any]:
    """The fixture ``tests/adapters/data/<name>.json``."""
    return json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))


def sse_events(file: str) -> list[str]:
    """The events (``event:``/``data:`` blocks) of a recorded SSE stream."""
    text = (DATA / file).read_text(encoding="utf-8")
    return [block + "\n\n" for block in text.split("\n\n") if block.strip()]


class FixtureServer:
    """Serves scripted fixture replies in order and records the requests."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._script: list[tuple[dict[str, Any], int | None]] = []
        self._lock = threading.Lock()
        self.holding = threading.Event()
        self._release = threading.Event()
        self.disconnected = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # quiet
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                with server._lock:
                    server.requests.append(
                        {
                            "path": self.path,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                            "body": json.loads(raw or b"null"),
                        }
                    )
                    if not server._script:  # an unexpected request: a clear failure, not a hang
                        fixture = {
                            "response": {"status": 500, "json": {"error": {"message": "no scripted reply"}}}
                        }
                        hold_after = None
                    else:
                        fixture, hold_after = server._script.pop(0)
                response = fixture["response"]
                self.send_response(response["status"])
                if "sse" in response:
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    try:
                        for index, event in enumerate(sse_events(response["sse"])):
                            if hold_after is not None and index == hold_after:
                                server.holding.set()
                                server._release.wait(60)
                            self.wfile.write(event.encode("utf-8"))
                            self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        server.disconnected.set()
                    return
                payload = json.dumps(response["json"]).encode("utf-8")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for key, value in response.get("headers", {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(payload)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def script(self, fixture: dict[str, Any], *, hold_after: int | None = None) -> None:
        """Queue ``fixture``'s reply for the next request."""
        with self._lock:
            self._script.append((fixture, hold_after))

    def release(self) -> None:
        """Let a held stream continue."""
        self._release.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._release.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(10)


@contextmanager
def running_server() -> Iterator[FixtureServer]:
    """A started :class:`FixtureServer`, stopped afterwards."""
    server = FixtureServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def check_request(server: FixtureServer, name: str, index: int = -1) -> dict[str, Any]:
    """The request the SDK sent equals the fixture's (``SESSIONKEEPER_RECORD_FIXTURES=1`` records it)."""
    fixture = load_fixture(name)
    sent = server.requests[index]
    if os.environ.get("SESSIONKEEPER_RECORD_FIXTURES") == "1":
        fixture["request"]["body"] = sent["body"]
        (DATA / f"{name}.json").write_text(
            json.dumps(fixture, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    assert sent["path"] == fixture["request"]["path"]
    assert sent["body"] == fixture["request"]["body"]
    return sent
