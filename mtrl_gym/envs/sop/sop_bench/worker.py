"""The benchmark's ``tools.py`` in a separate process: a JSON-lines tool server and its client.

The official tools are third-party code: they run in a child process (``python -m
mtrl_gym.envs.sop.sop_bench.worker FOLDER``), never imported into the env's process. A
request is ``{"name", "arguments"}``; the reply is ``{"ok": true, "result": ...}`` or
``{"ok": false, "error": "..."}``.

Tools are dispatched as the official harness does: the first name of ``dir(module)`` that
ends with ``Manager`` (and does not start with ``_``) is the domain's tool manager, made with
no arguments; a call goes through its ``process_tool_call(name, arguments)`` when it has one
(so a reply has that method's shape, e.g. ``{"cross_check_response": "success"}``), else to
its method of that name. Arguments pass unchanged (no schema check, no conversion); a
raised exception is the reply's ``error`` as the official harness shows it (``str(e)``).
numpy and pandas values in a reply become plain JSON values (NaN: null).
"""

from __future__ import annotations

import importlib.util
import json
import math
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


def _manager(module: Any) -> Any:
    """The official loader's choice: the first ``dir(module)`` name ending with ``Manager``, instantiated."""
    for attr in dir(module):
        if attr.endswith("Manager") and not attr.startswith("_"):
            return getattr(module, attr)()
    raise ImportError("no Manager class found in tools.py (the official loader uses the first name ending with "
                      "'Manager')")


def _dispatch(manager: Any, name: str, arguments: dict[str, Any]) -> Any:
    """One call as the official tool manager makes it."""
    if hasattr(manager, "process_tool_call"):
        return manager.process_tool_call(name, arguments)
    if hasattr(manager, name):
        return getattr(manager, name)(**arguments)
    raise AttributeError(f"Tool '{name}' not found in tools instance")


def _plain(value: Any) -> Any:
    """A reply as plain JSON values: numpy/pandas scalars unwrapped, NaN and infinities as null."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            value = value.item()
        except (TypeError, ValueError):
            return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    return str(value)


def _serve(folder: str, names: list[str]) -> None:
    out = sys.stdout
    sys.stdout = sys.stderr  # the tools' prints must not corrupt the protocol
    try:
        module_name = f"benchmark_tools_{Path(folder).name}"
        spec = importlib.util.spec_from_file_location(module_name, Path(folder) / "tools.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        sys.path.insert(0, folder)
        spec.loader.exec_module(module)
        manager = _manager(module)
    except Exception as e:  # report any failure to the client instead of dying silently
        out.write(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}) + "\n")
        out.flush()
        return
    out.write(json.dumps({"ok": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            job = json.loads(line)
            if job["name"] not in names:
                raise ValueError(f"Tool '{job['name']}' not found. Available tools: {', '.join(names)}")
            reply = {"ok": True, "result": _plain(_dispatch(manager, job["name"], job["arguments"]))}
        except Exception as e:  # the official harness reports any exception as the call's error
            reply = {"ok": False, "error": str(e) or type(e).__name__}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2:])
