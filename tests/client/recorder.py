"""A real HTTP server that records the metrics batches posted to it (standard library only).

In a thread (``RecordingServer``) for tests in the same process, or as its own process
(``python recorder.py``: prints ``port N``, then ``rows N`` for each batch received) for tests that kill it."""
from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        server: RecordingServer = self.server.recorder
        status = server.status
        if status == 201:
            server.record(self.path, dict(self.headers), json.loads(body))
        payload = json.dumps({"rows": 0, "errors": []}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


class RecordingServer:
    """Answers 201 (``status``) and keeps every batch: ``batches`` are (path, headers, body)."""

    def __init__(self, port: int = 0, on_batch=None):
        self.status = 201
        self.batches: list[tuple[str, dict, dict]] = []
        self.lock = threading.Lock()
        self.on_batch = on_batch
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.recorder = self
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def record(self, path: str, headers: dict, body: dict) -> None:
        with self.lock:
            self.batches.append((path, headers, body))
        if self.on_batch:
            self.on_batch(body)

    @property
    def rows(self) -> list[dict]:
        with self.lock:
            return [row for _, _, body in self.batches for row in body["rows"]]

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


if __name__ == "__main__":
    server = RecordingServer(int(sys.argv[1]) if len(sys.argv) > 1 else 0,
                             on_batch=lambda body: print("rows", len(body["rows"]), flush=True))
    print("port", server.port, flush=True)
    server.thread.join()
