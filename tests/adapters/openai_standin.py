"""A tiny OpenAI-compatible chat endpoint for tests: replies follow a script, one per assistant turn.

``python openai_standin.py PORT SCRIPT.json`` serves ``POST /v1/chat/completions`` (JSON or
SSE streaming) and ``GET /v1/models`` on 127.0.0.1. Reply ``i`` of a conversation is
``script[i]`` where ``i`` is the number of assistant messages already in the request (the
last entry repeats). Every request body is appended to ``SCRIPT.json.requests.jsonl``.
"""

from __future__ import annotations

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def make_handler(script: list[str], log_path: str):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def _send(self, code: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, json.dumps({"object": "list", "data": [{"id": "scripted", "object": "model"}]}).encode())
            elif self.path == "/health":
                self._send(200, b"{}")
            else:
                self._send(404, b"{}")

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            with open(log_path, "a") as f:
                f.write(json.dumps(body) + "\n")
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())
                return
            turn = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
            text = script[min(turn, len(script) - 1)]
            created, model = int(time.time()), body.get("model", "scripted")
            usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
            if body.get("stream"):
                chunks = [
                    {"id": "c", "object": "chat.completion.chunk", "created": created, "model": model,
                     "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": None}]},
                    {"id": "c", "object": "chat.completion.chunk", "created": created, "model": model,
                     "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                    {"id": "c", "object": "chat.completion.chunk", "created": created, "model": model,
                     "choices": [], "usage": usage},
                ]
                data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
                self._send(200, data, "text/event-stream")
                return
            reply = {"id": "c", "object": "chat.completion", "created": created, "model": model,
                     "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": "stop"}], "usage": usage}
            self._send(200, json.dumps(reply).encode())

    return Handler


def main(argv: list[str]) -> None:
    port, script_path = int(argv[1]), argv[2]
    with open(script_path) as f:
        script = json.load(f)
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(script, script_path + ".requests.jsonl"))
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv)
