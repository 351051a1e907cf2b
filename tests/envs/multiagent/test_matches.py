"""Evaluation of a seat: the single-seat view, win/draw/loss with intervals, the eval CLI on the duel."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pettingzoo")

from mtrl_gym.envs.multiagent.seat import SeatEnv  # noqa: E402
from mtrl_gym.envs.wordle.solver import format_guess  # noqa: E402
from mtrl_gym.error import ConfigError  # noqa: E402
from mtrl_gym.evaluation.matches import episode_outcome, evaluate_matches, match_summary  # noqa: E402
from mtrl_gym.evaluation.specs import EvalConfig, RunSpec  # noqa: E402


def test_seat_env_plays_the_opponents_inside_step():
    env = SeatEnv("mtrl/WordleDuel-v0", opponents={"player_1": "solver"})
    obs, info = env.reset(options={"answer": "paste"})
    assert info["seat"] == "player_0" and "Wordle Duel" in obs
    obs, reward, terminated, truncated, info = env.step(format_guess("crane"))
    assert "Opponent's guess 1/6: SLATE" in obs and reward == 0.0 and not terminated
    obs, reward, terminated, truncated, info = env.step(format_guess("paste"))
    assert terminated and reward == 1.0 and info["outcome"] == "win"


def test_seat_env_skips_the_cycles_the_seat_waits():
    env = SeatEnv("mtrl/SOP-CustomerCall-v0")  # the scripted customer by default
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(
        '<tool_call>{"name": "ask_customer", "arguments": {"question": "Your name, please?"}}</tool_call>')
    assert obs.startswith("Customer: Name: ") and not info["waiting"] and info["cycle"] == 2


def test_seat_env_arguments_are_checked():
    with pytest.raises(ConfigError, match="unknown seat 'player_9'"):
        SeatEnv("mtrl/WordleDuel-v0", seat="player_9")
    with pytest.raises(ConfigError, match=r"`opponents` names \['player_0'\]"):
        SeatEnv("mtrl/WordleDuel-v0", opponents={"player_0": "solver"})


def _record(task, outcome, *, stop="terminated", failed=False, success=False):
    return {"task_index": task, "final_info": {"outcome": outcome}, "stop_reason": stop, "failed": failed,
            "success": success}


def test_match_summary_rates_and_forfeits():
    records = [_record(0, "win"), _record(0, "loss"), _record(1, "draw", stop="truncated"),
               _record(1, "win", stop="max_turns"), _record(2, None, failed=True, stop="failed"),
               _record(2, "win")]
    assert [episode_outcome(r) for r in records] == ["win", "loss", "draw", "loss", "loss", "win"]
    s = match_summary(records, 3, resamples=200)
    assert s["games"] == 6
    assert s["win"]["value"] == pytest.approx((0.5 + 0.0 + 0.5) / 3)
    assert s["draw"]["value"] == pytest.approx(0.5 / 3) and s["loss"]["value"] == pytest.approx((0.5 + 0.5 + 0.5) / 3)
    assert s["win"]["low"] <= s["win"]["value"] <= s["win"]["high"]
    assert s["score"]["value"] == pytest.approx(s["win"]["value"] - s["loss"]["value"])


def test_a_model_and_the_references_against_solver_and_random(tmp_path, chatml_tokenizer):
    pytest.importorskip("torch")
    from tiny_models import build_tiny_llama

    model_dir = tmp_path / "tiny"
    build_tiny_llama(len(chatml_tokenizer)).save_pretrained(model_dir)
    chatml_tokenizer.save_pretrained(model_dir)
    runs = [RunSpec("base", model=str(model_dir), serving={"max_new_tokens": 4}), RunSpec("solver", policy="solver"),
            RunSpec("random", policy="random")]
    result = evaluate_matches("mtrl/WordleDuel-v0", runs, split="val", limit=3,
                              config=EvalConfig(n=2, max_episode_tokens=2048, progress=False),
                              out_dir=tmp_path / "eval", report=False)
    m = result.matches
    assert set(m) == {"solver", "random"} and set(m["solver"]) == {"base", "solver", "random"}
    assert m["random"]["solver"]["win"]["value"] == 1.0 and m["solver"]["solver"]["draw"]["value"] == 1.0
    assert m["solver"]["base"]["loss"]["value"] == 1.0  # a random model: out of context, a forfeit
    saved = json.loads((tmp_path / "eval" / "matches.json").read_text())
    assert saved["seat"] == "player_0" and saved["matches"] == m
    assert (tmp_path / "eval" / "vs-random" / "summary.json").is_file()


def test_matches_need_a_multiagent_env():
    with pytest.raises(ConfigError, match="'mtrl/Wordle-v0' is not a multi-agent env"):
        evaluate_matches("mtrl/Wordle-v0", [RunSpec("solver", policy="solver")])


def test_eval_cli_reports_win_draw_loss(tmp_path, capsys):
    from mtrl_gym.cli import main

    code = main(["eval", "mtrl/WordleDuel-v0", "--policy", "solver", "--limit", "2", "-n", "1", "--no-mlflow",
                 "--quiet", "--opponent", "random", "--out", str(tmp_path / "cli")])
    out = capsys.readouterr().out
    assert code == 0 and "opponent" in out and "random     solver" in out
    assert json.loads((tmp_path / "cli" / "matches.json").read_text())["matches"]["random"]["solver"]["games"] == 2
