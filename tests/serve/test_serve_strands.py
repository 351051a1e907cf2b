"""The Strands example against a real server: a fast check on a tiny model with scripted
tool calls, and (slow) two GRPO steps of the example on the embedded SmolLM2."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("strands")
pytest.importorskip("fastapi")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_strands.py"
REPLIES = ['<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>',
           'Hmm. <tool_call>{"name": "guess_word", "arguments": {"guess": "slate"}}</tool_call>',
           '<tool_call>{"name": "guess_word", "arguments": {"guess": "paste"}}</tool_call>']


def _example():
    spec = importlib.util.spec_from_file_location("agent_strands_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_strands_agent_history_extends_its_session_token_exactly(serve, kit, tiny_model, chatml_tokenizer):
    server = serve(kit.ForcedSampler(tiny_model, chatml_tokenizer, REPLIES), chatml_tokenizer)
    session = server.service.create_session()
    sid = session.id
    reward = _example().run({"prompt": json.dumps({"answer": "paste", "id": "t"})}, server.session_url(sid),
                            api_key=session.key)
    assert reward == pytest.approx(1.35)  # solved on guess 3 (1.55 - 0.1 per extra guess)
    session = server.service.get_session(sid)
    assert session.retokenized == 0 and session.requests == 3
    seg = session.segments[0]
    assert seg.tool_calls == 3
    assert [chatml_tokenizer.decode(seg.token_ids[a:b - 1]) for a, b in seg.turn_spans] == REPLIES
    tool_turns = [m for m in seg.messages if m["role"] == "tool"]
    assert len(tool_turns) == 2 and tool_turns[0]["name"] == "guess_word"


def test_without_a_session_each_turns_calls_get_their_own_ids(serve, kit, tiny_model, chatml_tokenizer):
    """On the sessionless ``/v1`` route the server keeps no history, yet a conversation's call
    ids never repeat (a client may pair calls and results by id): the Strands example plays
    there as on a session, and an openai client sees ``call_<turn>_<k>``."""
    server = serve(kit.ForcedSampler(tiny_model, chatml_tokenizer, REPLIES * 2), chatml_tokenizer)
    reward = _example().run({"prompt": json.dumps({"answer": "paste", "id": "t"})}, server.url + "/v1",
                            api_key=server.api_key)
    assert reward == pytest.approx(1.35)
    c = kit.client(server.url + "/v1", server.api_key)
    tools = [{"type": "function", "function": {"name": "guess_word", "parameters": {"type": "object"}}}]
    messages, ids = [{"role": "user", "content": "Play."}], []
    for _ in range(3):
        msg = c.chat.completions.create(model=kit.MODEL, messages=messages, tools=tools).choices[0].message
        ids += [call.id for call in msg.tool_calls]
        messages += [msg.model_dump(exclude_none=True),
                     *({"role": "tool", "tool_call_id": call.id, "content": "ok"} for call in msg.tool_calls)]
    assert ids == ["call_0_0", "call_1_0", "call_2_0"]


@pytest.mark.slow
def test_two_grpo_steps_of_the_strands_example_on_smollm2(tmp_path):
    from mtrl_gym.cli import main

    argv = ["train", "--set", "source.name=agent", "--set", f"source.target={EXAMPLE}:run", "--model", "smollm2-135m", "--output-dir", str(tmp_path / "run"),
            "--max-steps", "2", "--global-batch-size", "1", "--group-size", "2", "--serving.max-new-tokens", "32",
            "--lora.rank", "4", "--tracking.tracker", "none", "--validation.every", "0", "--checkpoints.save-every", "0",
            "--no-progress", "--train-size", "4", "--val-size", "1", "--episode.time-budget-s", "600"]
    assert main(argv) == 0
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["rollout/episodes"] == 2 and r["rollout/failure_rate"] == 0 for r in rows)
    assert all(r["rollout/tokens_sampled"] > 0 for r in rows)
