"""The isolation guard: network, writes, processes; per-thread; restored after every call."""

from __future__ import annotations

import builtins
import os
import socket
import subprocess
import threading
import urllib.request
from pathlib import Path

import pytest

from mtrl_gym.envs.sandbox import Cassette, SandboxViolation, ToolContext, ToolSandboxEnv, sandbox_guard, tool
from mtrl_gym.envs.sandbox.isolation import is_installed

TASK = {"id": "t", "prompt": "p", "answer": 1}


def run_one(tools, action, **kw):
    env = ToolSandboxEnv(tools=tools, tasks=[TASK], **kw)
    env.reset(seed=0)
    return env, env.step(action)


def test_a_tool_opening_a_socket_in_replay_mode_is_refused_with_a_clear_result(tmp_path, api_server):
    port = int(api_server.base.rsplit(":", 1)[1])

    @tool
    def fetch_status(path: str) -> str:
        """Fetch a page of the status site."""
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
            return s.recv(100).decode()

    @tool(network=True)
    def recorded_lookup(q: str) -> str:
        """Recorded."""
        return q

    cassette = Cassette(tmp_path / "c.jsonl", mode="record")
    cassette.add(recorded_lookup, {"q": "x"}, "answer")
    cassette.save()
    env, (obs, _, _, _, info) = run_one([fetch_status, recorded_lookup],
                                        'fetch_status("/users") recorded_lookup("x")', cassette=tmp_path / "c.jsonl")
    assert env.mode == "replay"
    assert info["tool_results"][0]["content"] == (
        f"Refused: tool fetch_status tried to reach the network (connect to 127.0.0.1:{port}); this sandbox does not "
        "allow it. A tool that needs this must declare @tool(network=True).")
    assert info["tool_outcomes"][0]["status"] == "refused" and info["num_refused"] == 1
    assert info["tool_results"][1]["content"] == "answer"
    assert api_server.hits == []


def test_urllib_is_refused_but_a_network_tool_may_connect(api_server):
    @tool
    def sneaky(url: str) -> str:
        """Uses urllib without declaring network."""
        return urllib.request.urlopen(url, timeout=2).read().decode()

    @tool(network=True)
    def honest(url: str) -> str:
        """Declares network."""
        try:
            return urllib.request.urlopen(url, timeout=2).read().decode()
        except urllib.error.HTTPError as e:
            return f"HTTP {e.code}"

    _, (_, _, _, _, info) = run_one([sneaky, honest], f'sneaky("{api_server.base}/x") honest("{api_server.base}/x")',
                                    mode="live")
    assert [o["status"] for o in info["tool_outcomes"]] == ["refused", "ok"]
    assert info["tool_results"][1]["content"] == "HTTP 401"  # it reached the server (no auth header)
    assert len(api_server.hits) == 1


def test_a_tool_that_swallows_the_refusal_is_still_reported_refused():
    @tool
    def stubborn() -> str:
        """Catches everything."""
        try:
            socket.getaddrinfo("example.com", 80)
        except OSError:
            return "worked anyway"
        return "no guard"

    _, (_, _, _, _, info) = run_one([stubborn], "stubborn()")
    assert info["tool_outcomes"][0]["status"] == "refused"
    assert "(look up example.com)" in info["tool_results"][0]["content"]


def test_writes_only_inside_the_episode_workdir(tmp_path):
    outside = tmp_path / "outside.txt"

    @tool
    def scratch(ctx: ToolContext, text: str) -> str:
        """Writes a scratch file in the episode directory."""
        p = ctx.workdir / "notes" / "a.txt"
        p.parent.mkdir()
        p.write_text(text)
        return p.read_text()

    @tool
    def escape(ctx: ToolContext) -> str:
        """Tries to write next to the work directory."""
        (ctx.workdir / ".." / "escape.txt").write_text("x")
        return "escaped"

    @tool
    def outside_write(path: str) -> str:
        """Writes anywhere."""
        Path(path).write_text("x")
        return "wrote"

    @tool(writes=True)
    def declared_write(path: str) -> str:
        """Declares writes."""
        Path(path).write_text("x")
        return "wrote"

    @tool
    def remove(path: str) -> str:
        """Deletes a file."""
        os.remove(path)
        return "removed"

    outside.write_text("keep")
    env, (_, _, _, _, info) = run_one(
        [scratch, escape, outside_write, declared_write, remove],
        f'scratch("hello") escape() outside_write("{tmp_path}/new.txt") remove("{outside}") '
        f'declared_write("{tmp_path}/declared.txt")')
    assert [o["status"] for o in info["tool_outcomes"]] == ["ok", "refused", "refused", "refused", "ok"]
    assert info["tool_results"][2]["content"].startswith(
        f"Refused: tool outside_write tried to write outside its work directory (open('w') {tmp_path}/new.txt)")
    assert "(os.remove " in info["tool_results"][3]["content"]
    assert outside.read_text() == "keep" and not (tmp_path / "new.txt").exists()
    assert (tmp_path / "declared.txt").exists()
    workdir = env._ctx.workdir_if_created
    assert workdir is not None and (workdir / "notes" / "a.txt").read_text() == "hello"
    env.reset(seed=1)  # a new episode gets a fresh directory; the old one is removed
    assert not workdir.exists() and env._ctx.workdir_if_created is None
    env.close()


def test_new_processes_are_refused():
    @tool
    def shell(cmd: str) -> str:
        """Runs a command."""
        return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout

    @tool
    def system(cmd: str) -> str:
        """Runs os.system."""
        return str(os.system(cmd))

    _, (_, _, _, _, info) = run_one([shell, system], 'shell("echo hi") system("echo hi")')
    assert [o["status"] for o in info["tool_outcomes"]] == ["refused", "refused"]
    assert "tried to start a process (subprocess.Popen(echo hi))" in info["tool_results"][0]["content"]
    assert "@tool(subprocess=True)" in info["tool_results"][1]["content"]


def test_a_refused_live_call_is_never_recorded(tmp_path):
    @tool(recorded=True)
    def leaky(q: str) -> str:
        """Recorded but opens a socket anyway."""
        try:
            socket.create_connection(("127.0.0.1", 9), timeout=0.1)
        except OSError:
            pass
        return "value"

    env, (_, _, _, _, info) = run_one([leaky], 'leaky("a")', cassette=tmp_path / "c.jsonl", mode="record")
    assert info["tool_outcomes"][0]["status"] == "refused"
    assert len(env._cassette) == 0


def test_guard_patches_are_removed_after_each_call():
    original_open, original_connect = builtins.open, socket.socket.connect
    with sandbox_guard(tool="t"):
        assert builtins.open is not original_open and is_installed()
    assert builtins.open is original_open and socket.socket.connect is original_connect
    assert "connect" not in vars(socket.socket) and not is_installed()


def test_a_patch_made_between_guards_is_wrapped_and_then_left_in_place(monkeypatch, tmp_path):
    with sandbox_guard(tool="t"):
        pass
    calls = []

    def patched_open(file, mode="r", *args, **kwargs):
        calls.append((str(file), mode))
        return "patched"

    monkeypatch.setattr(builtins, "open", patched_open)
    with sandbox_guard(tool="t"):
        assert builtins.open is not patched_open
        assert builtins.open("some/file") == "patched"
        with pytest.raises(SandboxViolation):
            builtins.open(tmp_path / "x", "w")
    assert builtins.open is patched_open and calls == [("some/file", "r")]


def test_the_guard_is_per_thread(tmp_path):
    inside, done = threading.Event(), threading.Event()
    errors = []

    def other_thread():
        inside.wait(5)
        try:
            (tmp_path / "from_other_thread.txt").write_text("fine")  # not guarded
        except Exception as e:  # pragma: no cover - the failure this test looks for
            errors.append(e)
        done.set()

    t = threading.Thread(target=other_thread)
    t.start()
    with sandbox_guard(tool="t") as report:
        inside.set()
        assert done.wait(5)
        with pytest.raises(SandboxViolation):
            (tmp_path / "from_guarded_thread.txt").write_text("no")
    t.join()
    assert errors == [] and (tmp_path / "from_other_thread.txt").exists()
    assert [v.kind for v in report.violations] == ["write"]


def test_nested_guards_and_concurrent_threads_restore_cleanly():
    barrier = threading.Barrier(4)
    refused = []

    def worker():
        with sandbox_guard(tool="w", network=False) as outer:
            barrier.wait(5)
            with sandbox_guard(tool="inner", network=True):
                pass
            try:
                socket.getaddrinfo("localhost", 80)
            except SandboxViolation:
                pass
            refused.append(len(outer.violations))

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert refused == [1, 1, 1, 1]
    assert not is_installed() and "connect" not in vars(socket.socket)
