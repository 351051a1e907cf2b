"""The benchmark's ``tools.py`` in a separate process: a JSON-lines tool server and its client.

The official tools are third-party code: they run in a child process (``python -m
mtrl_gym.envs.sop.sop_bench.worker FOLDER``), never imported into the env's process. A
request is ``{"name", "arguments"}``; the reply is ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": "..."}``. Tools are the module's functions named like the tool
specs, or the methods of the first class in the module that defines all of them.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mtrl_gym.error import ConfigError

__all__ = ["ToolProcess"]


class ToolProcess:
    """A running tool server for one domain folder; :meth:`call` sends one request and waits."""

    def __init__(self, folder: str | Path, names: list[str], *, timeout: float = 30.0):
        self.folder, self.names, self.timeout = Path(folder), list(names), timeout
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        self.proc = subprocess.Popen([sys.executable, "-m", "mtrl_gym.envs.sop.sop_bench.worker", str(self.folder),
                                      *self.names], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env, cwd=str(self.folder))
        hello = self.proc.stdout.readline()
        if not hello:
            err = self.proc.stderr.read()[-600:]
            raise ConfigError(f"the SOP-Bench tools of {str(self.folder)!r} did not start: {err.strip() or 'no output'}")
        ready = json.loads(hello)
        if not ready.get("ok"):
            raise ConfigError(f"the SOP-Bench tools of {str(self.folder)!r}: {ready.get('error')}")

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        self.proc.stdin.write(json.dumps({"name": name, "arguments": arguments}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.proc = None
            return {"ok": False, "error": "the benchmark's tool process stopped; it restarts on the next call"}
        return json.loads(line)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


def _resolve(module: Any, names: list[str]) -> dict[str, Any]:
    if all(callable(getattr(module, n, None)) for n in names):
        return {n: getattr(module, n) for n in names}
    for _, cls in inspect.getmembers(module, inspect.isclass):
        if cls.__module__ == module.__name__ and all(callable(getattr(cls, n, None)) for n in names):
            obj = cls()
            return {n: getattr(obj, n) for n in names}
    raise LookupError(f"tools.py defines neither functions nor a class with all of {names}")


def _serve(folder: str, names: list[str]) -> None:
    out = sys.stdout
    sys.stdout = sys.stderr  # the tools' prints must not corrupt the protocol
    try:
        spec = importlib.util.spec_from_file_location("sop_bench_tools", Path(folder) / "tools.py")
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, folder)
        spec.loader.exec_module(module)
        tools = _resolve(module, names)
    except Exception as e:  # report any failure to the client instead of dying silently
        out.write(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}) + "\n")
        out.flush()
        return
    out.write(json.dumps({"ok": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            job = json.loads(line)
            result = tools[job["name"]](**job["arguments"])
            reply = {"ok": True, "result": json.loads(json.dumps(result, default=str))}
        except Exception as e:
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2:])
