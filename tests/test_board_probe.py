"""examples/wordle_board_probe.py: single boards scored letter by letter, and a real run."""

from __future__ import annotations

import json

import pytest


def _record(task_id: str, priors: list[str], reply: str) -> dict:
    """An evaluation record of one turn; its final info is what the real env reads from the reply."""
    import gymnasium

    lines = "\n".join(f"Guess {i}/6: {w} - (feedback)" for i, w in enumerate(priors, start=1))
    text = '<tool_call>{"name": "guess_word", "arguments": {"guess": "' + reply
    env = gymnasium.make("mtrl/Wordle-v0")
    env.reset(seed=0)
    return {"task_id": task_id, "final_info": env.step(text)[4], "messages": [
        {"role": "system", "content": "Rules."},
        {"role": "user", "content": f"Some guesses have already been played for you:\n{lines}\nKnown so far: ..."},
        {"role": "assistant", "content": text}]}


def test_each_guess_is_scored_against_the_board_it_was_shown(probe):
    # secret shard, CRANE pre-played: A green, R yellow, C N E gray
    records = [_record("a", ["CRANE"], 'S H A R D"'),     # a word that fits every clue
               _record("a", ["CRANE"], 'X X A X X"'),     # keeps the green, no gray, no R: not a word
               _record("a", ["CRANE"], 'C R A N E"'),     # the board's own word again: grays used
               _record("a", ["CRANE"], 'S H A"'),         # three letters: not scored
               _record("b", ["MOIST"], "shard")]          # secret plumb: M yellow, O I S T gray; no green
    r = probe.score(records, {"a": "shard", "b": "plumb"})
    assert (r["boards"], r["five_letters"], r["valid"], r["consistent"]) == (5, 4, 3, 1)
    assert (r["greens_kept"]["followed"], r["greens_kept"]["boards"]) == (3, 3)
    assert (r["grays_avoided"]["followed"], r["grays_avoided"]["boards"]) == (2, 4)   # shard and xxaxx
    assert (r["yellows_used"]["followed"], r["yellows_used"]["boards"]) == (2, 4)     # shard and crane have R
    assert 0 < r["greens_kept"]["random"] < 0.2 and r["greens_kept"]["low"] < 1.0 == r["greens_kept"]["rate"]


def test_bad_counts_are_refused(probe):
    with pytest.raises(SystemExit):
        probe.parse_args(["none", "--words", "0"])


def test_a_real_probe_of_the_base_model_with_the_recap(probe, tmp_path):
    """The embedded SmolLM2 plays two single boards through the real engine, with the recap line."""
    pytest.importorskip("torch")
    import torch

    torch.set_num_threads(1)
    results = probe.main(["none", "--recap", "--words", "1", "--temperatures", "1.0", "--out", str(tmp_path)])
    assert results["1"]["boards"] == 2
    assert json.loads((tmp_path / "probe.json").read_text()) == results
    record = probe.read_records(tmp_path / "T1" / "trajectories" / "probe.jsonl")[0]
    first = next(m["content"] for m in record["messages"] if m["role"] == "user")
    assert probe.PRIOR.findall(first) and first.splitlines()[-1].startswith("Recap: gray ")
