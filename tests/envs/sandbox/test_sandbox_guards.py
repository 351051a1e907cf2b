"""Issue items 7 and 8: task ids that reveal nothing, sandbox guard gaps, the message-cut flag."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import gymnasium
import pytest

from mtrl_gym.envs.sandbox import Cassette, ToolSandboxEnv, sandbox_guard, tool
from mtrl_gym.envs.sandbox.isolation import SandboxViolation
from mtrl_gym.error import InvalidTask
from mtrl_gym.parsing import MAX_PARSE_CHARS
from mtrl_gym.registry import list_envs

SOP_IDS = [e for e in list_envs() if e.startswith("mtrl/SOP-")]


# ------------------------------------------------------------------ item 7: task ids

@pytest.mark.parametrize("env_id", SOP_IDS)
def test_sop_task_ids_do_not_carry_the_world_seed(env_id):
    env = gymnasium.make(env_id)
    for seed in range(5):
        _, info = env.reset(seed=seed)
        world = env.unwrapped.task["seed"]
        assert str(world) not in info["task_id"] and f"{world:x}" not in info["task_id"]


def test_ids_of_rows_without_one_do_not_depend_on_the_answer():
    env = gymnasium.make("mtrl/Sandbox-Shop-v0").unwrapped
    a = env.reset(options={"task": {"prompt": "Which SKU?", "answer": "A-1"}})[1]["task_id"]
    b = env.reset(options={"task": {"prompt": "Which SKU?", "answer": "B-2"}})[1]["task_id"]
    assert a == b and a.startswith("sandbox-")
    sop = gymnasium.make("mtrl/SOP-KYBReview-v0").unwrapped
    _obs, info = sop.reset(options={"task": {"seed": 12345}})
    assert "12345" not in info["task_id"]


def test_task_ids_are_stable_across_processes():
    code = ("import gymnasium, mtrl_gym, json; ids = []\n"
            "for e in ['mtrl/SOP-DangerousGoods-v0', 'mtrl/Sandbox-Orders-v0']:\n"
            "    env = gymnasium.make(e); ids.append(env.reset(seed=7)[1]['task_id'])\n"
            "print(json.dumps(ids))")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(h)}).stdout for h in (1, 2)]
    assert runs[0] == runs[1] and len(json.loads(runs[0])) == 2


# ------------------------------------------------------------------ item 8: guard gaps

def test_fchmod_on_a_descriptor_of_an_outside_file_is_refused(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("x")
    outside.chmod(0o644)
    work = tmp_path / "work"
    work.mkdir()
    fd = os.open(outside, os.O_RDONLY)
    try:
        with sandbox_guard(tool="t", write_roots=[work]) as report:
            for call in (lambda: os.fchmod(fd, 0o777), lambda: os.chmod(fd, 0o777)):
                with pytest.raises(SandboxViolation, match=r"outside\.txt"):
                    call()
    finally:
        os.close(fd)
    assert oct(outside.stat().st_mode & 0o777) == "0o644" and len(report.violations) == 2
    inside = work / "in.txt"
    inside.write_text("x")
    fd = os.open(inside, os.O_RDONLY)
    try:
        with sandbox_guard(tool="t", write_roots=[work]):
            os.fchmod(fd, 0o600)  # inside the work dir: allowed
    finally:
        os.close(fd)


def test_udp_sendmsg_is_refused():
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(0.2)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        with sandbox_guard(tool="t"):
            with pytest.raises(SandboxViolation, match="network"):
                sender.sendmsg([b"leak"], [], 0, receiver.getsockname())
        with pytest.raises(socket.timeout):
            receiver.recv(16)
    finally:
        sender.close()
        receiver.close()


@tool(recorded=True)
def echo(text: str) -> str:
    """Echo.

    Args:
        text: what to echo.
    """
    return text


def test_a_row_cassette_cannot_record_outside_the_working_directory(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    env = ToolSandboxEnv(tools=[echo], mode="replay_or_record", cassette=str(work / "c.jsonl"))
    row = {"prompt": "p", "answer": "x", "cassette": "../../escaped.jsonl"}
    with pytest.raises(InvalidTask, match=r"cassette '\.\./\.\./escaped\.jsonl' is outside the working directory"):
        env.reset(options={"task": row})
    assert not (tmp_path.parent / "escaped.jsonl").exists()
    env.reset(options={"task": dict(row, cassette="sub.jsonl")})  # inside: fine
    env.step('<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>')
    env.step("<final_answer>x</final_answer>")
    assert len(Cassette(work / "sub.jsonl")) == 1


@pytest.mark.parametrize("env_id", [e for e in list_envs() if not e.startswith("mtrl/Wordle")])
def test_a_cut_message_is_flagged(env_id):
    env = gymnasium.make(env_id)
    env.reset(seed=0)
    _, _, _, _, info = env.step("x" * (MAX_PARSE_CHARS + 10))
    assert info["message_truncated"] is True
    env.reset(seed=0)
    assert env.step("hello")[4]["message_truncated"] is False
