"""The CPU recipe's own logic (examples/train_wordle_cpu.py): the short version's settings, the
serving temperature chosen on training words, and the held-out table's intervals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

#: What a stubbed held-out column returns: the play metrics the table and the trial read.
STUB_METRICS = {"valid_word_rate": 0.5, "new_word_rate": 0.5, "consistency": 0.0, "random_consistency": 0.0,
                "solve_rate": 0.0, "eval_seconds": 1.0}


def _run_stubbed(recipe, monkeypatch, argv: list[str], **stages) -> None:
    """``recipe.main()`` on ``argv`` with its costly stages stubbed: the demonstrations, GRPO (an
    adapter under the SFT one) and every held-out column (:data:`STUB_METRICS`); ``stages``
    replaces more of the example's functions, or these, by name."""
    import sys

    monkeypatch.setattr(recipe, "demonstrations", lambda config, out, args: [out / "demos.jsonl"])
    monkeypatch.setattr(recipe, "reinforce", lambda config: (Path(config.init_adapter) / "grpo",
                                                             {"steps": 2, "seconds": {"step": 30.0}}))
    monkeypatch.setattr(recipe, "games", lambda *a, **k: dict(STUB_METRICS))
    for name, stub in stages.items():
        monkeypatch.setattr(recipe, name, stub)
    monkeypatch.setattr(sys, "argv", ["train_wordle_cpu.py", *argv])
    recipe.main()


def test_the_short_version_is_step_capped_with_its_own_learning_rate(recipe, monkeypatch):
    short = recipe.parse_args(["--short"])
    assert (short.sft_steps, short.sft_lr, short.eval_tasks, short.sft_minutes) == (40, 2e-3, 16, None)
    assert (short.demos, short.lexicon, short.boards, short.temperature_words) == (160, 320, 320, 16)
    assert recipe.parse_args(["--short", "--boards", "0"]).boards == 0
    full = recipe.parse_args([])
    assert (full.sft_steps, full.sft_lr, full.eval_tasks, full.lexicon, full.boards) == (160, 5e-4, 128, 0, 0)
    assert full.temperature_words == 48  # the full recipe's trial: three times the short one's words, for its noise
    assert recipe.parse_args(["--temperature-words", "8"]).temperature_words == 8
    assert recipe.parse_args(["--short", "--eval-tasks", "4"]).eval_tasks == 4
    assert recipe.parse_args(["--short", "--eval-tasks", "128"]).eval_tasks == 128  # a flag given wins
    for wrong in ("0", "129"):
        with pytest.raises(SystemExit):
            recipe.parse_args(["--eval-tasks", wrong])
        with pytest.raises(SystemExit):  # 0 would make the trial's slice train[-0:], the whole split
            recipe.parse_args(["--temperature-words", wrong])
    assert (short.grpo_steps, full.grpo_steps, full.demos, full.dagger, full.expert_iteration) == (2, 6, 960, 0, 0)
    given = recipe.parse_args(["--short", "--sft-steps", "10", "--sft-lr", "1e-3", "--grpo-steps", "8",
                               "--demos", "64"])  # a flag given is not overridden
    assert (given.sft_steps, given.sft_lr, given.grpo_steps, given.demos) == (10, 1e-3, 8, 64)
    # --precision auto is settled once, from the CPU, so every stage's record names the format it really used
    for native, settled in ((True, "bfloat16"), (False, "float32")):
        monkeypatch.setattr(recipe, "native_bf16", lambda device, native=native: native)
        assert recipe.parse_args([]).precision == recipe.parse_args(["--short"]).precision == settled
        for given in ("float32", "bfloat16"):
            assert recipe.parse_args(["--precision", given]).precision == given


def test_the_short_version_writes_words_and_the_recipe_spells(recipe, monkeypatch, tmp_path, chatml_tokenizer):
    from mtrl_gym import models
    from mtrl_gym.envs.wordle import game
    from mtrl_gym.rollout.trajectory import iter_jsonl
    from mtrl_gym.trainers.grpo.config import GRPOConfig

    assert (recipe.parse_args(["--short"]).guess_form, recipe.parse_args([]).guess_form) == ("word", "spelled")
    assert recipe.parse_args(["--short", "--spelling", "4"]).guess_form == "spelled"  # the drill spells
    assert recipe.parse_args(["--guess-form", "word"]).guess_form == "word"
    with pytest.raises(SystemExit):
        recipe.parse_args(["--short", "--guess-form", "word", "--spelling", "4"])
    preset = GRPOConfig.load("cpu-sft")
    assert recipe.with_guess_form(preset, "spelled") is preset
    words = recipe.with_guess_form(preset, "word")
    for config in (words, preset):
        prompts = [w["kwargs"]["text"] for w in (*config.env_wrappers, *config.validation.env_wrappers)
                   if w["name"] == "SystemPrompt"]
        assert len(prompts) == 2 and len(set(prompts)) == 1
        assert prompts[0].endswith("Use the feedback." + recipe.SPELLED_SENTENCE * (config is preset))
    assert words.to_dict()["serving"] == preset.to_dict()["serving"]
    with pytest.raises(SystemExit, match="give --guess-form spelled"):  # a prompt of one's own is not edited
        recipe.with_guess_form(GRPOConfig.load("cpu-sft", overrides=['env_wrappers=[{"name": "SystemPrompt", '
                                                                      '"kwargs": {"text": "Play.", "tools": false}}]']),
                               "word")

    monkeypatch.setattr(models, "load_tokenizer", lambda name: chatml_tokenizer)
    for form, config in (("word", words), ("spelled", preset)):
        args = recipe.parse_args(["--short", "--guess-form", form, "--demos", "2", "--lexicon", "2", "--boards", "2"])
        for path in recipe.demonstrations(config, tmp_path / form, args):
            for t in iter_jsonl(path):
                assert t.messages[0]["role"] == "system" and ("in capitals" in t.messages[0]["content"]) == (
                    form == "spelled")
                for m in t.messages:
                    if m["role"] == "assistant":
                        guess = m["content"].removeprefix(config.serving.assistant_prefix).removesuffix('"')
                        assert (game.unspell(guess) if form == "spelled" else guess) in game.allowed_index(), guess


def test_the_recap_line_reaches_training_validation_and_every_data_file(recipe, monkeypatch, tmp_path,
                                                                       chatml_tokenizer):
    """``--recap``: WordleRecap, a serving wrapper, outside PriorGuesses in the training and
    validation envs, and in the demonstrations, so the model reads the same line in SFT, GRPO
    and the held-out columns."""
    from mtrl_gym import models
    from mtrl_gym.rollout.sources.local import make_rollout_engine
    from mtrl_gym.rollout.trajectory import iter_jsonl
    from mtrl_gym.trainers.grpo.config import GRPOConfig

    assert not recipe.parse_args(["--short"]).recap and recipe.parse_args(["--short", "--recap"]).recap
    assert recipe.parse_args([]).recap and not recipe.parse_args(["--no-recap"]).recap  # the recipe's default
    preset = GRPOConfig.load("cpu-sft")
    assert preset.serving.wrappers == []
    config = recipe.with_recap(preset)
    assert config.serving.wrappers == [{"name": "WordleRecap", "kwargs": {}}]
    assert [w["name"] for w in config.env_wrappers] == [w["name"] for w in preset.env_wrappers]
    two_priors = [{**w, "kwargs": {**w["kwargs"], "num_priors": 2}} if w["name"] == "PriorGuesses" else w
                  for w in config.env_wrappers]
    for validation in (False, True):  # the envs the GRPO rollouts play: two words pre-played, then the recap of them
        engine = make_rollout_engine(config.replace(env_wrappers=two_priors), None, chatml_tokenizer,
                                     validation=validation)
        env = engine._make_env()
        obs, info = env.reset(seed=3)
        env.close()
        assert obs.splitlines()[-1].startswith("Recap: gray ") and obs.count("Recap:") == 1, obs
        assert (obs.splitlines()[-1] == "Recap: gray -; yellow -; green _ _ _ _ _") == validation

    monkeypatch.setattr(models, "load_tokenizer", lambda name: chatml_tokenizer)
    args = recipe.parse_args(["--short", "--recap", "--demos", "2", "--lexicon", "2", "--boards", "2"])
    paths = recipe.demonstrations(recipe.with_guess_form(config, "word"), tmp_path, args)
    assert [p.name for p in paths] == ["demos.jsonl", "lexicon.jsonl", "boards.jsonl"]
    turns = 0
    for path in paths:
        for t in iter_jsonl(path):
            for before, m in zip(t.messages, t.messages[1:]):
                if m["role"] == "assistant":  # the text just before every guess ends with the recap
                    assert before["content"].splitlines()[-1].startswith("Recap: gray "), before["content"]
                    assert before["content"].count("Recap:") == 1, before["content"]
                    turns += 1
    assert turns >= 6


def test_the_temperature_is_chosen_on_training_words_by_new_real_words(recipe, monkeypatch):
    """The rule: most new real words a turn, the higher temperature on a tie; the rows are the
    training split's last words, never a validation word."""
    from mtrl_gym.trainers.grpo.config import GRPOConfig
    from mtrl_gym.trainers.grpo.data import load_task_splits

    config = GRPOConfig.load("cpu-sft")
    train, val = load_task_splits(config.env, None, None, train_size=config.train_size, val_size=config.val_size,
                                  split_seed=config.split_seed)
    rates = {0.3: 0.25, 0.5: 0.25, 0.7: 0.1, 1.0: 0.0}
    seen = []

    def fake_games(config, out, name, adapter, temperature, constrained=False, **tasks):
        assert tasks["precision"] == "float32"  # the trial plays in the run's number format
        seen.append(tasks["tasks"])
        return {"new_word_rate": rates[temperature]}

    monkeypatch.setattr(recipe, "games", fake_games)
    best, trials = recipe.serving_temperature(config, Path("unused"), "adapter", 16, list(rates), "float32")
    assert best == 0.5 and set(trials) == {"0.3", "0.5", "0.7", "1"}
    words = {row["answer"] for row in seen[0]}
    assert seen[0] == train[-16:] and not words & {row["answer"] for row in val}


def test_the_table_gives_intervals_and_no_valid_guess(recipe):
    base = {"valid_word_rate": 0.0, "valid_word_low": 0.0, "valid_word_high": 0.038, "valid_words": 0, "turns": 96,
            "new_word_rate": 0.0, "top_guess": "", "top_guess_share": 0.0}
    trained = {"valid_word_rate": 0.25, "valid_word_low": 0.172, "valid_word_high": 0.348, "valid_words": 24,
               "turns": 96, "top_guess": "irate", "top_guess_share": 0.3, "top_guess_n": 7}
    text = recipe.table({"base": base, "SFT": trained}, "held out, T=0.3 (recommended)")
    assert "| held out, T=0.3 (recommended) | base | SFT |" in text
    assert "| valid word | 0.0% [0.0%, 3.8%] (0/96) | 25.0% [17.2%, 34.8%] (24/96) |" in text
    assert "no valid guess" in text and "30.0% (irate, 7/24)" in text  # the count beside the share
    reads = {**trained, "greens_kept": 0.351, "random_greens_kept": 0.062, "greens_kept_n": 53, "green_turns": 151}
    text = recipe.table({"SFT": reads})
    assert "| greens kept, any 5 letters (random word) | 35.1% (6.2%) (53/151) |" in text
    assert "| grays avoided (random word) | - |" in text  # a record made before the metric existed
    none = recipe.table({"SFT": {**reads, "yellows_used": 0.0, "yellows_used_n": 0, "yellow_turns": 0,
                                 "random_yellows_used": 0.0}})
    assert "| yellows used (random word) | no such turn |" in none


@pytest.mark.parametrize("flag", ["--dagger", "--expert-iteration", "--distill"])
def test_the_second_round_plays_training_words_only_and_expert_iteration_cuts_at_the_first_misfit(
        recipe, monkeypatch, tmp_path, flag):
    import json

    from mtrl_gym.envs.wordle import game
    from mtrl_gym.envs.wordle.play_metrics import board_consistent
    from mtrl_gym.trainers import demos as demos_module
    from mtrl_gym.trainers.grpo.config import GRPOConfig
    from mtrl_gym.trainers.grpo.data import load_task_splits

    config = GRPOConfig.load("cpu-sft")
    train, val = load_task_splits(config.env, None, None, train_size=config.train_size, val_size=config.val_size,
                                  split_seed=config.split_seed)
    prefix = config.serving.assistant_prefix
    played, made = [], []

    def spelled(word):
        return prefix + " ".join(word.upper()) + '"'

    def fake_games(config, out, name, adapter, temperature, constrained=False, **tasks):
        played.append((temperature, constrained, tasks["tasks"]))
        assert tasks["precision"] == args.precision  # the second round's games in the run's number format
        (out / "trajectories").mkdir(parents=True)
        lines = []
        for i, row in enumerate(tasks["tasks"]):
            first = next(w for w in ("crane", "slate", "pious") if w != row["answer"])
            fits = next(w for w in game.answers() if w != first and board_consistent(
                w, [(first, game.pattern_code(game.feedback(first, row["answer"])))]))
            actions = [spelled(first), spelled(fits), spelled(first), "not a word"]  # the repeat does not fit
            lines.append({"task_index": i, "sample_index": 0, "task_id": row["id"],
                          "messages": [{"role": "assistant", "content": a} for a in actions]})
        path = out / "trajectories" / f"{name}.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines))
        return {}

    def fake_learner_demos(demo, games, *, relabel):
        made.append((relabel, games))
        return []

    monkeypatch.setattr(recipe, "games", fake_games)
    monkeypatch.setattr(demos_module, "learner_demos", fake_learner_demos)
    relabel = flag == "--dagger"
    args = recipe.parse_args(["--short", flag, "24", "--precision", "bfloat16"])
    adapter = tmp_path / "sft" / "adapter"
    adapter.mkdir(parents=True)
    (adapter / "adapter_model.safetensors").write_text("weights")
    kind = {"--dagger": "dagger", "--expert-iteration": "expert", "--distill": "distill"}[flag]
    path = recipe.learner_data(config, tmp_path, adapter, args, kind)
    assert path.name == {"--dagger": "dagger.jsonl", "--expert-iteration": "expert.jsonl",
                         "--distill": "distill.jsonl"}[flag] and path.is_file()
    ((temperature, constrained, rows),) = played
    assert (temperature, constrained) == ((recipe.LEARNER_TEMPERATURE, False) if relabel else (1.0, True))
    assert rows == train[160:184]  # after the 160 games' words, before the temperature's last 16 and never val
    assert not {r["id"] for r in rows} & {r["id"] for r in train[-16:] + val}
    ((relabelled, games),) = made
    assert relabelled is relabel and [row for row, _ in games] == rows
    # DAgger keeps every turn (the teacher labels them all), and distillation (every state of the constrained
    # policy counts); expert iteration the turns before the misfit
    assert all(len(actions) == (2 if flag == "--expert-iteration" else 4) for _, actions in games)
    assert recipe.learner_data(config, tmp_path, adapter, args, kind) == path and len(played) == 1  # made: reused
    (adapter / "adapter_model.safetensors").write_text("another SFT")
    with pytest.raises(SystemExit, match="adapter is not the one it was made from"):
        recipe.learner_data(config, tmp_path, adapter, args, kind)
    for pair in (["--dagger", "8", "--expert-iteration", "8"], ["--distill", "8", "--expert-iteration", "8"],
                 ["--distill", "-1"], ["--dagger", "8", "--distill-fitting"]):
        with pytest.raises(SystemExit):
            recipe.parse_args(pair)
    both = recipe.parse_args(["--dagger", "8", "--distill", "8", "--distill-fitting"])  # DAgger's labels beside
    assert (both.dagger, both.distill, both.distill_fitting) == (8, 8, True)


def test_the_spelling_drill_spells_every_answer_word_twice_in_the_serving_format(recipe, monkeypatch, tmp_path,
                                                                                  chatml_tokenizer):
    from mtrl_gym import models
    from mtrl_gym.envs.wordle import game
    from mtrl_gym.rollout.trajectory import iter_jsonl
    from mtrl_gym.trainers.grpo.config import GRPOConfig

    monkeypatch.setattr(models, "load_tokenizer", lambda name: chatml_tokenizer)
    config = GRPOConfig.load("cpu-sft")
    drill = list(iter_jsonl(recipe.spelling_drill(config, tmp_path)))
    words = []
    for t in drill:
        assert len(t.turn_spans) <= recipe.SPELLING_WORDS and sum(t.loss_mask) == sum(b - a for a, b in t.turn_spans)
        for a, b in t.turn_spans:
            assert set(t.loss_mask[a:b]) == {1}
            words.append(game.unspell(chatml_tokenizer.decode(t.token_ids[a:b]).removesuffix('"')))
        assert [m["content"] for m in t.messages if m["role"] == "assistant"] == [
            config.serving.assistant_prefix + game.spell(w) + '"' for w in words[-len(t.turn_spans):]]
    assert sorted(words) == sorted(game.answers() * 2)
    assert words[:len(game.answers())] != words[len(game.answers()):]  # each round in its own order


def test_the_spelling_drill_trains_first_and_sft_continues_from_its_adapter(recipe, monkeypatch, tmp_path, capsys):
    calls = []

    def fake_supervised(demos, out, args, init_adapter=None, steps=None, learning_rate=None):
        calls.append(([Path(d).name for d in demos], out.name, init_adapter, steps, learning_rate))
        return out / "adapter", {"steps": steps or args.sft_steps, "seconds": 60.0}

    formats = []

    def fake_games(*a, precision, **k):
        formats.append(precision)
        return dict(STUB_METRICS)

    _run_stubbed(recipe, monkeypatch, ["--short", "--spelling", "3", "--spelling-lr", "5e-3", "--serving-temperature",
                                       "0.5", "--no-dictionary", "--out", str(tmp_path), "--precision", "bfloat16"],
                 spelling_drill=lambda config, out: out / "spelling.jsonl", supervised=fake_supervised, games=fake_games)
    served = capsys.readouterr().out.splitlines()[-1].strip()  # the last line: serve what it trained
    assert served == f"mtrl-gym serve --model smollm2-135m --adapter {tmp_path / 'sft' / 'adapter' / 'grpo'}"
    assert formats == ["bfloat16"] * 6  # base, SFT, SFT + GRPO at 0.5 and at 1.0
    assert calls == [(["spelling.jsonl"], "sft-spelling", None, 3, 5e-3),
                     (["demos.jsonl"], "sft", tmp_path / "sft-spelling" / "adapter", None, None)]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["sft"]["spelling"]["steps"] == 3 and results["sft"]["seconds"] == 120.0
    assert results["precision"] == "bfloat16"
    assert results["temperature_words"] is None  # --serving-temperature: no trial, so no trial words
    for wrong in (["--spelling", "-1"], ["--spelling-lr", "5e-3"]):  # a drill's rate without a drill does nothing
        with pytest.raises(SystemExit):
            recipe.parse_args(wrong)


@pytest.mark.parametrize("flags, labels, distilled", [
    (["--dagger", "8", "--distill", "8", "--distill-fitting"], ["dagger.jsonl"], ["distill.jsonl"]),
    (["--dagger", "8"], ["dagger.jsonl"], []),
    (["--distill", "8"], [], ["distill.jsonl"]),
    (["--expert-iteration", "8"], ["expert.jsonl"], [])])
def test_the_second_round_learns_labels_as_words_and_distils_the_dictionary_decoded_games(
        recipe, monkeypatch, tmp_path, flags, labels, distilled):
    rounds, made = [], []

    def fake_supervised(demos, out, args, init_adapter=None, steps=None, learning_rate=None, distill=(),
                        fitting=False):
        rounds.append(([Path(d).name for d in demos], out.name, init_adapter, steps,
                       [Path(d).name for d in distill], fitting))
        return out / "adapter", {"steps": steps or args.sft_steps, "seconds": 60.0}

    def fake_learner_data(config, out, adapter, args, name):
        made.append((name, adapter))
        return out / f"{name}.jsonl"

    _run_stubbed(recipe, monkeypatch, ["--short", *flags, "--serving-temperature", "0.5", "--no-dictionary",
                                       "--skip-base", "--out", str(tmp_path)],
                 supervised=fake_supervised, learner_data=fake_learner_data)
    first = tmp_path / "sft" / "adapter"
    assert [name for name, _ in made] == [name.removesuffix(".jsonl") for name in labels + distilled]
    assert all(adapter == first for _, adapter in made)  # every game is the first round's model's
    assert rounds[1] == (["demos.jsonl", *labels], "sft2", first, 16, distilled, "--distill-fitting" in flags)


def test_a_stage_made_with_other_settings_or_inputs_is_not_reused(recipe, tmp_path):
    """``--out`` continues a run stage by stage; a result that these flags did not make stops
    the run with what differs, instead of being reused silently."""
    data = tmp_path / "demos.jsonl"
    assert recipe.reuse(data, {"num_episodes": 160}) is False  # not made yet: run it (its record is written now)
    assert (tmp_path / "demos.jsonl.stage.json").is_file()
    assert recipe.reuse(data, {"num_episodes": 160}) is False  # an interrupted stage that wrote nothing: run it again
    data.write_text("{}\n")
    assert recipe.reuse(data, {"num_episodes": 160}) is True
    with pytest.raises(SystemExit, match=r"settings.num_episodes: 160 -> 320.*another --out"):
        recipe.reuse(data, {"num_episodes": 320})
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_model.safetensors").write_bytes(b"round 1")
    run = tmp_path / "grpo"
    assert recipe.reuse(run, {"max_steps": 2}, [adapter, None]) is False
    assert (run / "stage.json").is_file() and recipe.reuse(run, {"max_steps": 2}, [adapter]) is False  # record only
    (run / ".stage.json.part").write_text("{")  # left by a kill while the record was written: not a result
    assert recipe.reuse(run, {"max_steps": 2}, [adapter]) is False
    (run / "summary.json").write_text("{}")
    assert recipe.reuse(run, {"max_steps": 2}, [adapter]) is True
    moved = tmp_path / "elsewhere" / "adapter"
    moved.parent.mkdir()
    adapter.rename(moved)
    assert recipe.reuse(run, {"max_steps": 2}, [moved]) is True  # inputs compare by content, not path
    (moved / "adapter_model.safetensors").write_bytes(b"after DAgger")  # same path, other weights
    with pytest.raises(SystemExit, match=r"elsewhere/adapter is not the one it was made from"):
        recipe.reuse(run, {"max_steps": 2}, [moved])
    legacy = tmp_path / "old.jsonl"
    legacy.write_text("{}\n")
    with pytest.raises(SystemExit, match="no record of the settings"):
        recipe.reuse(legacy, {})
    trial = tmp_path / "temperature" / "T0.5"  # a folder with a dot in its name: an evaluation's
    assert recipe.reuse(trial, {}, [moved]) is False and (trial / "stage.json").is_file()
    (trial / "config.json").write_text("{}")
    assert recipe.reuse(trial, {}, [moved]) is True
    (moved / "adapter_model.safetensors").write_bytes(b"GRPO trained again")
    with pytest.raises(SystemExit, match=r"T0.5 was made .*elsewhere/adapter is not the one it was made from"):
        recipe.reuse(trial, {}, [moved])
    games = tmp_path / "dagger.jsonl"  # a long value is shown around its first change
    assert recipe.reuse(games, {"tasks": [f"wordle_train_{i:04d}" for i in range(160, 208)]}) is False
    games.write_text("{}\n")
    with pytest.raises(SystemExit, match=r'settings.tasks: \.\.\.[^;]*"wordle_train_0207"\] -> \.\.\.[^;]*'
                                         r'"wordle_train_0207", "wordle_train_0208"'):
        recipe.reuse(games, {"tasks": [f"wordle_train_{i:04d}" for i in range(160, 224)]})


def test_sft_and_grpo_rerun_only_with_the_flags_and_inputs_they_were_made_with(recipe, capsys, monkeypatch, tmp_path):
    import json

    trained, resumed, configs = [], [], []

    class FakeTrainer:  # writes what SFTTrainer and GRPOTrainer leave behind, weights from the learning rate
        def __init__(self, config, resume=None):
            self.config = config
            configs.append(config)
            trained.append(Path(config.output_dir).name)
            resumed.append(resume)

        def train(self):
            out = Path(self.config.output_dir)
            adapter = out / "checkpoints" / f"step_{self.config.max_steps:06d}" / "adapter"
            adapter.mkdir(parents=True, exist_ok=True)
            (adapter / "adapter_model.safetensors").write_text(repr(self.config.learning_rate))
            summary = {"status": "FINISHED", "adapter": str(adapter), "steps": self.config.max_steps, "seconds": 1.0,
                       "run_dir": str(out)}
            (out / "summary.json").write_text(json.dumps(summary))
            return summary

        def close(self):
            pass

    monkeypatch.setattr(recipe, "SFTTrainer", FakeTrainer)
    monkeypatch.setattr(recipe, "GRPOTrainer", FakeTrainer)
    from mtrl_gym.trainers.grpo.config import GRPOConfig

    demos = tmp_path / "demos.jsonl"
    demos.write_text('{"task_id": "a"}\n')
    args = recipe.parse_args(["--short"])
    adapter, _ = recipe.supervised([demos], tmp_path / "sft", args)
    assert recipe.supervised([demos], tmp_path / "sft", args)[0] == adapter and trained == ["sft"]  # reused
    # SFT runs in the flags' number format, and a folder made in the other one is not continued
    assert configs[0].autocast_dtype == {"bfloat16": "bfloat16", "float32": None}[args.precision]
    other = "float32" if args.precision == "bfloat16" else "bfloat16"
    with pytest.raises(SystemExit, match=r"autocast_dtype: .*->"):
        recipe.supervised([demos], tmp_path / "sft", recipe.parse_args(["--short", "--precision", other]))
    with pytest.raises(SystemExit, match=r"learning_rate: 0.002 -> 0.001"):
        recipe.supervised([demos], tmp_path / "sft", recipe.parse_args(["--short", "--sft-lr", "1e-3"]))
    with pytest.raises(SystemExit, match=r"max_steps: 40 -> 60"):
        recipe.supervised([demos], tmp_path / "sft", recipe.parse_args(["--short", "--sft-steps", "60"]))
    config = GRPOConfig.load("cpu-sft", overrides=[f"output_dir={tmp_path / 'grpo'}", "max_steps=2",
                                                   f"init_adapter={adapter}"])
    recipe.reinforce(config)
    recipe.reinforce(config)
    assert trained == ["sft", "grpo"]
    (adapter / "adapter_model.safetensors").write_text("a second SFT round")  # e.g. --dagger added later
    with pytest.raises(SystemExit, match=r"grpo was made with other settings or inputs.*step_000040/adapter is not"):
        recipe.reinforce(config)
    with pytest.raises(SystemExit, match=r"max_steps: 40 -> 60"):  # an unfinished run is checked too
        (tmp_path / "sft" / "summary.json").unlink()
        recipe.supervised([demos], tmp_path / "sft", recipe.parse_args(["--short", "--sft-steps", "60"]))
    recipe.supervised([demos], tmp_path / "sft", recipe.parse_args(["--short", "--micro-batch-tokens", "512"]))
    assert trained[-1] == "sft" and resumed[-1] == tmp_path / "sft"  # continued from its checkpoints, same settings
    (tmp_path / "moved").mkdir()  # a run folder moved (or copied) elsewhere: its adapter is found there
    (tmp_path / "sft").rename(tmp_path / "moved" / "sft")
    moved, _ = recipe.supervised([demos], tmp_path / "moved" / "sft", recipe.parse_args(["--short", "--micro-batch-tokens", "512"]))
    assert moved == tmp_path / "moved" / "sft" / "checkpoints" / "step_000040" / "adapter" and moved.is_dir()
    assert trained.count("sft") == 2  # reused, not trained again
    demos.write_text('{"task_id": "b"}\n')
    with pytest.raises(SystemExit, match=r"demos.jsonl is not the one it was made from"):
        recipe.supervised([demos], tmp_path / "moved" / "sft", args)
    # a round without distillation records no distillation setting, so folders made before it still match
    assert not any("distill" in key for key in json.loads((tmp_path / "moved" / "sft" / "stage.json").read_text())[
        "settings"])
    # --distill: the constrained policy's games go to SFTConfig.distill, weighted, beside the demonstrations
    games = tmp_path / "distill.jsonl"
    games.write_text('{"task_id": "c"}\n')
    recipe.supervised([demos], tmp_path / "sft2", args, init_adapter=moved, steps=32, distill=[games])
    assert configs[-1].distill == [str(games)] and configs[-1].distill_repeat == recipe.DISTILL_REPEAT
    assert configs[-1].demos == [str(demos)] and trained[-1] == "sft2"
    recipe.supervised([demos], tmp_path / "sft2", args, init_adapter=moved, steps=32, distill=[games])
    assert trained.count("sft2") == 1  # reused
    games.write_text('{"task_id": "d"}\n')
    with pytest.raises(SystemExit, match=r"distill.jsonl is not the one it was made from"):
        recipe.supervised([demos], tmp_path / "sft2", args, init_adapter=moved, steps=32, distill=[games])
    assert not any("fitting" in key for key in json.loads((tmp_path / "sft2" / "stage.json").read_text())[
        "settings"])  # a run without --distill-fitting records no such setting either
    # --distill-fitting: the same games, scored toward the words that fit; another setting, so not reused
    games.write_text('{"task_id": "c"}\n')
    with pytest.raises(SystemExit, match=r"distill_fitting"):
        recipe.supervised([demos], tmp_path / "sft2", args, init_adapter=moved, steps=32, distill=[games],
                          fitting=True)
    recipe.supervised([demos], tmp_path / "sft3", args, init_adapter=moved, steps=32, distill=[games], fitting=True)
    assert configs[-1].distill_fitting is True and trained[-1] == "sft3"
    capsys.readouterr()
    with pytest.raises(SystemExit):
        recipe.parse_args(["--short", "--distill-fitting"])
    assert "give --distill GAMES too" in capsys.readouterr().err


@pytest.mark.slow
def test_real_teacher_games_and_a_real_sft_run_are_reused_on_a_rerun_and_refused_on_other_flags(
        recipe, monkeypatch, tmp_path):
    """The real counterpart of the fakes above: demonstrations through the rollout engine and one
    SFT step of the embedded SmolLM2. A rerun with the same flags trains nothing (so nothing in
    a real record or adapter changes between identical calls); another step count is refused."""
    pytest.importorskip("torch")
    import torch

    from mtrl_gym.trainers.grpo.config import GRPOConfig

    torch.set_num_threads(1)
    preset = GRPOConfig.load("cpu-sft")
    flags = ["--short", "--demos", "2", "--lexicon", "2", "--boards", "0", "--sft-steps", "1",
             "--micro-batch-tokens", "512"]
    args = recipe.parse_args(flags)
    demos = recipe.demonstrations(preset, tmp_path, args)
    adapter, summary = recipe.supervised(demos, tmp_path / "sft", args)
    assert summary["steps"] == 1 and (adapter / "adapter_model.safetensors").is_file()
    autocast = json.loads((tmp_path / "sft" / "stage.json").read_text())["settings"]["autocast_dtype"]
    assert autocast == {"bfloat16": "bfloat16", "float32": None}[args.precision]

    def no_training(*a, **k):
        raise AssertionError("a finished stage was trained again")

    monkeypatch.setattr(recipe, "make_demos", no_training)
    monkeypatch.setattr(recipe, "SFTTrainer", no_training)
    assert recipe.demonstrations(preset, tmp_path, recipe.parse_args(flags)) == demos
    assert recipe.supervised(demos, tmp_path / "sft", recipe.parse_args(flags))[0] == adapter
    with pytest.raises(SystemExit, match=r"settings.max_steps: 1 -> 2"):
        recipe.supervised(demos, tmp_path / "sft", recipe.parse_args([*flags, "--sft-steps", "2"]))
    with pytest.raises(SystemExit, match=r"demos.jsonl.*settings.num_episodes: 2 -> 3"):
        recipe.demonstrations(preset, tmp_path, recipe.parse_args([*flags, "--demos", "3"]))
    # A held-out column of real games: the evaluation store is the eval folder's record, and it
    # knows the adapter by its files (the SFT step above, trained again, is another model).
    from mtrl_gym.trainers.grpo.data import load_task_splits

    config = GRPOConfig.load("cpu-sft", overrides=["max_steps=1"])
    train, _ = load_task_splits(config.env, None, None, train_size=config.train_size, val_size=config.val_size,
                                split_seed=config.split_seed)
    column = recipe.games(config, tmp_path / "eval-T1-sft", "sft", str(adapter), 1.0, precision="float32",
                          tasks=train[-1:])
    again = recipe.games(config, tmp_path / "eval-T1-sft", "sft", str(adapter), 1.0, precision="float32",
                         tasks=train[-1:])
    assert column["turns"] >= 1 and (again["turns"], again["valid_words"]) == (column["turns"], column["valid_words"])
    # the folder's record knows the weights' number format: a bfloat16 column never continues a float32 one
    with pytest.raises(SystemExit, match=r"settings changed: dtype\. Reusing it would print a table"):
        recipe.games(config, tmp_path / "eval-T1-sft", "sft", str(adapter), 1.0, precision="bfloat16",
                     tasks=train[-1:])
    recap = recipe.games(recipe.with_recap(config), tmp_path / "eval-T1-sft-recap", "sft", str(adapter), 1.0,
                         precision="bfloat16", tasks=train[-1:])
    record = recipe.read_records(tmp_path / "eval-T1-sft-recap" / "trajectories" / "sft.jsonl")[0]
    prompts = [m["content"] for m in record["messages"] if m["role"] == "user"]
    assert recap["turns"] >= 1 and prompts[0].splitlines()[-1] == "Recap: gray -; yellow -; green _ _ _ _ _"
    from safetensors.torch import load_file, save_file

    weights = load_file(adapter / "adapter_model.safetensors")
    save_file({k: v + 0.01 for k, v in weights.items()}, adapter / "adapter_model.safetensors")
    # The folder's record knows the system prompt too: the same adapter asked for words is another run.
    with pytest.raises(SystemExit, match=r"system_prompt.*Reusing it would print a table these flags did not make"):
        recipe.games(recipe.with_guess_form(config, "word"), tmp_path / "eval-T1-sft", "sft", str(adapter), 1.0,
                     precision="float32", tasks=train[-1:])
    with pytest.raises(SystemExit, match=r"the adapter's files changed since its episodes were played.*"
                                         r"Reusing it would print a table these flags did not make: .*delete .*eval-T1-sft"):
        recipe.games(config, tmp_path / "eval-T1-sft", "sft", str(adapter), 1.0, precision="float32",
                     tasks=train[-1:])


def test_the_full_recipe_chooses_its_temperature_on_48_training_words_and_records_them(recipe, monkeypatch, tmp_path):
    """The trial's words reach ``serving_temperature`` and ``results.json`` (the full recipe's
    default 48; its figures are flat on 16, docs/wordle_runs.md)."""
    asked = []

    def fake_trial(config, out, adapter, words, temperatures, precision):
        asked.append((words, temperatures))
        return 0.5, {f"{t:g}": {"new_word_rate": 0.1} for t in temperatures}

    _run_stubbed(recipe, monkeypatch, ["--no-dictionary", "--skip-base", "--out", str(tmp_path)],
                 supervised=lambda demos, out, args, **k: (out / "adapter", {"steps": 1, "seconds": 1.0}),
                 serving_temperature=fake_trial)
    assert asked == [(48, [0.3, 0.5, 0.7, 1.0])]
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["temperature_words"] == 48 and results["serving_temperature"] == 0.5
