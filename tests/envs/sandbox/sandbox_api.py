"""A real HTTP API on 127.0.0.1 for the sandbox tests, and tools that call it."""

from __future__ import annotations

import json
import threading
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from mtrl_gym.envs.sandbox import ToolError, tool

#: The API's data. E-mail addresses and the token are secrets the cassette must not keep.
USERS = {
    "ann@example.com": {"user_id": "u1", "name": "Ann Lee", "email": "ann@example.com", "plan": "pro",
                        "api_token": "tok-ann-0001", "balance": 12.5},
    "bob@example.org": {"user_id": "u2", "name": "Bob Roy", "email": "bob@example.org", "plan": "free",
                        "api_token": "tok-bob-0002", "balance": 0.0},
}
API_KEY = "sk-live-0123456789abcdefghij"


class _Handler(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's naming
        url = urllib.parse.urlparse(self.path)
        query = dict(urllib.parse.parse_qsl(url.query))
        type(self).hits.append(self.path)
        if self.headers.get("Authorization") != f"Bearer {API_KEY}":
            return self._send(401, {"error": "unauthorized"})
        if url.path == "/users":
            user = USERS.get(query.get("email", ""))
            return self._send(200, user) if user else self._send(404, {"error": "no such user"})
        if url.path == "/invoices":
            n = int(query.get("limit", "2"))
            return self._send(200, [{"invoice": f"{query.get('user_id')}-{i}", "amount": 9.99 * (i + 1)}
                                    for i in range(n)])
        return self._send(404, {"error": "not found"})

    def _send(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):  # keep test output quiet
        pass


class ApiServer:
    """A running local API; ``base`` is its URL, ``hits`` the paths it served."""

    def __init__(self):
        _Handler.hits = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def hits(self) -> list[str]:
        return _Handler.hits

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def make_api_tools(base_url: str):
    """Tools that call the local API over HTTP (``network=True``: recorded, never run in replay)."""

    def get(path: str, **params):
        url = f"{base_url}{path}?{urllib.parse.urlencode(params)}"
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {API_KEY}"})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:
            raise ToolError(json.loads(e.read()).get("error", str(e))) from None

    @tool(network=True)
    def lookup_user(email: str) -> dict:
        """Find a user by e-mail.

        Args:
            email: The user's e-mail address.
        """
        return get("/users", email=email)

    @tool(network=True)
    def list_invoices(user_id: str, limit: int = 2) -> list:
        """List a user's invoices.

        Args:
            user_id: The user id.
            limit: How many invoices.
        """
        return get("/invoices", user_id=user_id, limit=limit)

    return [lookup_user, list_invoices]
