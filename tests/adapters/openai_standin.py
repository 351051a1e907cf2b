"""A tiny OpenAI-compatible chat endpoint for tests: replies follow a script, one per assistant turn.

``python openai_standin.py PORT SCRIPT.json`` serves ``POST /v1/chat/completions`` (JSON or
SSE streaming) and ``GET /v1/models`` on 127.0.0.1. Reply ``i`` of a conversation is
``script[i]`` where ``i`` is the number of assistant messages already in the request (the
last entry repeats). Every request body is appended to ``SCRIPT.json.requests.jsonl``.

A script entry is the reply text, or an object answered the way tool-calling servers answer:

* ``{"tool_calls": [{"name": ..., "arguments": {...}}, ...], "content": "..."}``: native
  ``tool_calls`` (ids ``call_<turn>_<k>`` unless a call gives its ``id``: some servers
  reuse ``call_0`` every turn; arguments as a JSON string, streamed in two pieces),
  ``finish_reason: "tool_calls"``;
* ``{"content": "...", "finish_reason": "length"}``: a reply cut off by ``max_tokens`` (a
  tool call the server could not parse stays in ``content``, with no ``tool_calls``).
"""

from __future__ import annotations

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _reply(entry, turn: int) -> tuple[str | None, list[dict], str]:
    """``(content, tool_calls, finish_reason)`` of one script entry."""
    if isinstance(entry, str):
        return entry, [], "stop"
    calls = [{"id": c.get("id") or f"call_{turn}_{k}", "type": "function",
              "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))}}
             for k, c in enumerate(entry.get("tool_calls") or [])]
    finish = entry.get("finish_reason") or ("tool_calls" if calls else "stop")
    return entry.get("content"), calls, finish


def _chunks(content, calls, finish, created, model) -> list[dict]:
    def chunk(delta, finish_reason=None):
        return {"id": "c", "object": "chat.completion.chunk", "created": created, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

    out = [chunk({"role": "assistant", "content": content})]
    for k, call in enumerate(calls):
        args = call["function"]["arguments"]
        half = len(args) // 2
        out.append(chunk({"tool_calls": [{"index": k, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"], "arguments": args[:half]}}]}))
        out.append(chunk({"tool_calls": [{"index": k, "function": {"arguments": args[half:]}}]}))
    out.append(chunk({}, finish))
    return out


def make_handler(script: list, log_path: str):
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
            content, calls, finish = _reply(script[min(turn, len(script) - 1)], turn)
            created, model = int(time.time()), body.get("model", "scripted")
            usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
            if body.get("stream"):
                chunks = _chunks(content, calls, finish, created, model)
                chunks.append({"id": "c", "object": "chat.completion.chunk", "created": created, "model": model,
                               "choices": [], "usage": usage})
                data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
                self._send(200, data, "text/event-stream")
                return
            message = {"role": "assistant", "content": content}
            if calls:
                message["tool_calls"] = calls
            reply = {"id": "c", "object": "chat.completion", "created": created, "model": model,
                     "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}
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
