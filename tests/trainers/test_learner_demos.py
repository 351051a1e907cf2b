"""Demonstrations from a learner's own games: DAgger relabelling and expert iteration."""

from __future__ import annotations

import pytest

from mtrl_gym.envs.wordle.play_metrics import board_consistent, replay_game
from mtrl_gym.envs.wordle.profile import wordle_split
from mtrl_gym.envs.wordle.solver import format_guess
from mtrl_gym.error import ConfigError
from mtrl_gym.trainers.demos import DemoConfig, learner_demos

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from tiny_models import build_tiny_llama

from mtrl_gym.trainers.sft.config import SFTConfig
from mtrl_gym.trainers.sft.trainer import SFTTrainer

PREFIX = '<tool_call>{"name": "guess_word", "arguments": {"guess": "'


def _config(**kw):
    return DemoConfig(serving={"assistant_prefix": PREFIX, "stop": ['"']},
                      policy_kwargs={"choice": "ranked", "spelled": True},
                      env_wrappers=[{"name": "SystemPrompt", "kwargs": {"text": "Play Wordle.", "tools": False}}], **kw)


def _text(tokenizer, traj, span):
    return tokenizer.decode(traj.token_ids[span[0]:span[1]])


# a learner's game: a real word, a non-word, a copy of that real word, a real word that ignores the clues
ROWS = wordle_split()[0][:2]
GAMES = [(ROWS[0], [PREFIX + "crane\"", PREFIX + "qqqqq\"", PREFIX + "crane\"", PREFIX + "sloth\""]),
         (ROWS[1], [PREFIX + "T A L O R Y\"", PREFIX + "irate\""])]


def test_dagger_relabels_every_board_the_learner_reached_with_a_guess_that_fits(chatml_tokenizer):
    demos = learner_demos(_config(), GAMES, relabel=True, tokenizer=chatml_tokenizer)
    assert len(demos) == sum(len(actions) for _, actions in GAMES)  # one example per learner turn
    by_task: dict[str, list] = {}
    for t in demos:
        by_task.setdefault(t.task_id, []).append(t)
    for row, actions in GAMES:
        examples = sorted(by_task[row["id"]], key=lambda t: len(t.turn_spans))
        assert [len(t.turn_spans) for t in examples] == list(range(1, len(actions) + 1))
        for t in examples:
            *context, target = t.turn_spans
            # the learner's turns are context: replayed as it wrote them, with no loss on them
            for span, action in zip(context, actions):
                assert set(t.loss_mask[span[0]:span[1]]) == {0}
                assert action[len(PREFIX):].rstrip('"') in _text(chatml_tokenizer, t, span)
            assert set(t.loss_mask[target[0]:target[1]]) == {1}
            assert sum(t.loss_mask) == target[1] - target[0]
            # the target: the teacher's word for the learner's board, one that could be the secret
            label = t.final_info["guess"]
            turns, _ = replay_game(row["answer"], actions[:len(context)] + [format_guess(label, spelled=True)])
            assert turns[-1].valid and board_consistent(label, turns[-1].board)
            assert t.final_info["spelled"]
    # the board after "crane", "qqqqq" holds one word (the non-word played no guess); the teacher answers it
    third = next(t for t in by_task[ROWS[0]["id"]] if len(t.turn_spans) == 3)
    assert third.final_info["guesses_used"] == 2


def test_expert_iteration_keeps_the_whole_game_as_targets(chatml_tokenizer):
    actions = [PREFIX + " ".join(w.upper()) + '"' for w in ("crane", "sloth")]
    demos = learner_demos(_config(), [(ROWS[0], actions)], relabel=False, tokenizer=chatml_tokenizer)
    (t,) = demos
    assert len(t.turn_spans) == 2
    assert all(set(t.loss_mask[a:b]) == {1} for a, b in t.turn_spans)
    assert [m["content"] for m in t.messages if m["role"] == "assistant"] == actions
    assert t.final_info["guesses_used"] == 2
    assert learner_demos(_config(), [], relabel=False, tokenizer=chatml_tokenizer) == []


def test_sft_continues_from_an_adapter_and_refuses_a_full_finetune_with_one(tmp_path, chatml_tokenizer):
    demos = learner_demos(_config(), GAMES, relabel=True, tokenizer=chatml_tokenizer)

    def run(name, **kw):
        return SFTTrainer(SFTConfig(output_dir=str(tmp_path / name), batch_size=2, max_steps=2,
                                    lora={"rank": 4, "alpha": 8}, tracking={"tracker": "none"}, progress=False,
                                    learning_rate=1e-2, **kw),
                          model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer,
                          demos=demos)

    first = run("first")
    adapter = first.train()["adapter"]
    trained = {n: p.detach().clone() for n, p in first.policy.named_parameters() if "lora_" in n}
    second = run("second", init_adapter=adapter)
    loaded = {n: p.detach().clone() for n, p in second.policy.named_parameters() if "lora_" in n}
    assert loaded.keys() == trained.keys() and all(torch.equal(loaded[n], trained[n]) for n in loaded)
    second.train()
    moved = {n: p for n, p in second.policy.named_parameters() if "lora_" in n}
    assert any(not torch.equal(moved[n], trained[n]) for n in moved)  # it trains further, from there
    with pytest.raises(ConfigError, match="init_adapter"):
        SFTConfig(init_adapter=adapter, lora={"full_finetune": True})


def _records(tmp_path, rows, actions, success=False):
    import json

    path = tmp_path / "learner.jsonl"
    lines = [{"task_index": i, "sample_index": 0, "task_id": row["id"], "success": success,
              "messages": [{"role": "user", "content": "board"}, *({"role": "assistant", "content": a} for a in actions)]}
             for i, row in enumerate(rows)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_the_demos_cli_refuses_learner_games_on_evaluation_tasks_and_out_of_format_actions(tmp_path, capsys):
    from mtrl_gym.cli import main

    out = tmp_path / "d.jsonl"
    val = wordle_split()[1][:1]
    assert main(["demos", "--config", "cpu-sft", "--learner", str(_records(tmp_path, val, [PREFIX + 'C R A N E"'])),
                 "--relabel", "--out", str(out)]) != 0
    assert "is not a training task" in capsys.readouterr().err and not out.exists()
    assert main(["demos", "--config", "cpu-sft", "--learner", str(_records(tmp_path, ROWS, ["crane"])),
                 "--relabel", "--out", str(out)]) != 0
    assert "does not start with the format prefill" in capsys.readouterr().err and not out.exists()
    assert main(["demos", "--relabel", "--out", str(out)]) != 0
    assert "--learner" in capsys.readouterr().err
    assert main(["demos", "--learner", str(tmp_path / "missing.jsonl"), "--out", str(out)]) != 0
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty.jsonl").write_text("")
    assert main(["demos", "--learner", str(tmp_path / "empty.jsonl"), "--out", str(out)]) != 0
    assert "holds no evaluation records" in capsys.readouterr().err and not out.exists()


@pytest.mark.slow
def test_dagger_from_the_command_line_on_a_real_evaluation(tmp_path):
    """`mtrl-gym eval` of the real SmolLM2 on training words, then `mtrl-gym demos --learner --relabel`."""
    import json

    from mtrl_gym.cli import main

    ev = tmp_path / "ev"
    assert main(["eval", "--model", "smollm2-135m", "-n", "1", "--split", "train", "--limit", "2",
                 "--assistant-prefix", PREFIX, "--stop", '"', "--max-tokens", "6", "--max-turns", "3",
                 "--out", str(ev), "--quiet"]) == 0
    (records,) = (ev / "trajectories").glob("*.jsonl")
    out = tmp_path / "dagger.jsonl"
    assert main(["demos", "--config", "cpu-sft", "--policy-kwargs", '{"spelled": true}', "--learner", str(records),
                 "--relabel", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 * 3  # every turn of both games, the model never solving in 3 base-model turns
    for r in rows:
        *context, (a, b) = r["turn_spans"]
        assert sum(r["loss_mask"]) == b - a and set(r["loss_mask"][a:b]) == {1}
        assert r["final_info"]["valid"] and r["final_info"]["clue_violations"] == 0


def test_a_replay_the_env_ends_early_is_left_out_with_a_warning(chatml_tokenizer):
    # the recorded game "solves" at its first action here (the secret is its word), so its later turns have no board
    row = ROWS[0]
    actions = [PREFIX + " ".join(row["answer"].upper()) + '"', PREFIX + 'C R A N E"']
    with pytest.warns(UserWarning, match="1 of 2 learner examples were left out"):
        demos = learner_demos(_config(), [(row, actions)], relabel=True, tokenizer=chatml_tokenizer)
    assert len(demos) == 1 and len(demos[0].turn_spans) == 1
