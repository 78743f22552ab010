"""A stand-in for llama.cpp's server that lists its model, then dies at its first generation
the way a build for the wrong CPU does (SIGSEGV at an AMX instruction).

Usage: python -m tests.fake_llama PORT
"""

from __future__ import annotations

import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps({"object": "list", "data": [{"id": "fake", "owned_by": "me"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        print("ggml_backend_amx_mul_mat: ldtilecfg", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGSEGV)


if __name__ == "__main__":
    signal.signal(signal.SIGSEGV, signal.SIG_DFL)
    HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
