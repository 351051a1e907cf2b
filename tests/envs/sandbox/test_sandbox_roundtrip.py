"""Record against a real local HTTP API, then replay offline: identical trajectories, no secrets kept."""

from __future__ import annotations

import json

import pytest
from sandbox_api import API_KEY, USERS, make_api_tools

from mtrl_gym.envs.sandbox import Cassette, ToolSandboxEnv
from mtrl_gym.error import CassetteError

TASKS = [{"id": "ann-plan", "prompt": "Which plan is the user ann@example.com on?", "answer": "pro"},
         {"id": "bob-invoices", "prompt": "What is the total of bob@example.org's last 3 invoices?",
          "answer": 59.94, "checker": {"type": "number", "abs_tol": 0.01}}]
SCRIPTS = {
    "ann-plan": ['lookup_user(email="ann@example.com")',
                 '<tool_call>{"name": "lookup_user", "arguments": {"email": "nobody@example.com"}}</tool_call>'
                 ' list_invoices("u1")',
                 "<final_answer>pro</final_answer>"],
    "bob-invoices": ['I will look the user up. lookup_user("bob@example.org")',
                     '{"name": "list_invoices", "arguments": {"limit": 3, "user_id": "u2"}}',
                     'list_invoices(user_id="u2", limit=3.0) list_invoices(limit=3, user_id="u2")',
                     "submit(answer=59.94)"],
}


def play(env, task, actions):
    """The trajectory of one scripted episode: everything the agent and the trainer see."""
    obs, info = env.reset(seed=0, options={"task": task})
    steps = [(obs, info["task_id"], info["tools"])]
    for action in actions:
        obs, reward, term, trunc, info = env.step(action)
        outcomes = [{k: v for k, v in o.items() if k != "source"} for o in info["tool_outcomes"]]
        steps.append((obs, reward, term, trunc, info["tool_results"], outcomes, info.get("grade")))
        if term or trunc:
            break
    return steps


def test_record_then_replay_gives_identical_trajectories(tmp_path, api_server):
    path = tmp_path / "accounts.cassette.jsonl"
    recorder = ToolSandboxEnv(tools=make_api_tools(api_server.base), tasks=TASKS, cassette=path, mode="record")
    recorded = {t["id"]: play(recorder, t, SCRIPTS[t["id"]]) for t in TASKS}
    recorder.close()
    hits = len(api_server.hits)
    assert hits == 7  # every live call reached the API once (the repeated list_invoices call too)
    assert recorded["ann-plan"][-1][1] == 1.0 and recorded["bob-invoices"][-1][1] == 1.0
    assert recorded["ann-plan"][2][4][0]["content"] == "Error: no such user"  # a recorded error
    api_server.stop()  # from here on, nothing can reach the API

    replayer = ToolSandboxEnv(tools=make_api_tools("http://127.0.0.1:9"), tasks=TASKS, cassette=path)
    for task in TASKS:
        assert play(replayer, task, SCRIPTS[task["id"]]) == recorded[task["id"]]
    assert len(api_server.hits) == hits
    # Replaying twice gives the same again (no hidden state in the cassette or env).
    assert play(replayer, TASKS[1], SCRIPTS["bob-invoices"]) == recorded["bob-invoices"]


def test_the_recording_keeps_no_secrets_and_replays_redacted_arguments(tmp_path, api_server):
    path = tmp_path / "c.jsonl"
    env = ToolSandboxEnv(tools=make_api_tools(api_server.base), tasks=TASKS, cassette=path, mode="record")
    steps = play(env, TASKS[0], SCRIPTS["ann-plan"][:1])
    shown = json.loads(steps[1][0])
    assert shown["name"] == "Ann Lee" and shown["email"].startswith("[REDACTED:email:")
    assert shown["api_token"].startswith("[REDACTED:secret:")
    env.close()
    text = path.read_text()
    for secret in (*USERS["ann@example.com"].values(), API_KEY):
        if isinstance(secret, str) and secret not in ("u1", "Ann Lee", "pro"):
            assert secret not in text, secret
    entry = json.loads(text.splitlines()[1])
    assert entry["arguments"]["email"] == shown["email"]
    # The model may pass the placeholder it saw back to a tool: it matches the same recording.
    replay = ToolSandboxEnv(tools=make_api_tools(api_server.base), tasks=TASKS, cassette=path)
    replay.reset(seed=0)
    _, _, _, _, info = replay.step(f'lookup_user(email="{shown["email"]}")')
    assert json.loads(info["tool_results"][0]["content"]) == shown


def test_replay_or_record_fills_gaps_and_strict_replay_fails_loudly(tmp_path, api_server):
    path = tmp_path / "c.jsonl"
    env = ToolSandboxEnv(tools=make_api_tools(api_server.base), tasks=TASKS, cassette=path, mode="replay_or_record")
    play(env, TASKS[0], SCRIPTS["ann-plan"][:1])
    play(env, TASKS[0], SCRIPTS["ann-plan"][:1])  # served from the cassette the second time
    assert len(api_server.hits) == 1
    env.close()
    strict = ToolSandboxEnv(tools=make_api_tools(api_server.base), tasks=TASKS, cassette=path, on_missing="strict")
    strict.reset(seed=0)
    with pytest.raises(CassetteError, match=r"no recorded response for list_invoices\{\"limit\":2,\"user_id\":\"u9\"\}"
                                            r" in replay mode \(on_missing='strict'\)\. The cassette has no calls of "
                                            r"list_invoices \(it has calls of: lookup_user\)\."):
        strict.step('list_invoices("u9")')
    nearest = ToolSandboxEnv(tools=make_api_tools(api_server.base), tasks=TASKS,
                             cassette=Cassette(path, on_missing="nearest"))
    nearest.reset(seed=0)
    _, _, _, _, info = nearest.step('lookup_user("anne@example.com")')
    assert info["tool_outcomes"][0]["source"] == "nearest" and '"Ann Lee"' in info["tool_results"][0]["content"]
