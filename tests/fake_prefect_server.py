"""A stand-in for ``prefect server start`` in the tests of the server's lifecycle: run as
``python tests/fake_prefect_server.py prefect server start --port PORT [--ignore-sigterm]``, it answers
``GET /api/health`` on 127.0.0.1:PORT and its command line reads as a Prefect server's
(:func:`ragmem.orchestration.server.prefect_servers` finds it); ``--ignore-sigterm`` makes it outlive
SIGTERM, as a server stuck in its shutdown, so that only SIGKILL ends it."""

from __future__ import annotations

import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Health(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200 if self.path.rstrip("/") == "/api/health" else 404)
        self.send_header("content-length", "4")
        self.end_headers()
        self.wfile.write(b"true")


if __name__ == "__main__":
    if "--ignore-sigterm" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    port = int(sys.argv[sys.argv.index("--port") + 1])
    HTTPServer(("127.0.0.1", port), Health).serve_forever()
