"""SFT toward a constrained policy (``SFTConfig.distill``): the loss, the allowed sets along a
game, and a run that moves the model's mass onto the allowed tokens."""

from __future__ import annotations

import pytest

from mtrl_gym.envs.wordle.profile import wordle_split
from mtrl_gym.error import ConfigError
from mtrl_gym.rollout.constraint import vocabulary_constraint
from mtrl_gym.trainers.demos import DemoConfig, learner_demos

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from tiny_models import build_tiny_llama

from mtrl_gym.trainers.sft.config import SFTConfig
from mtrl_gym.trainers.sft.data import distill_targets
from mtrl_gym.trainers.sft.loss import AllowedTokens, sft_loss
from mtrl_gym.trainers.sft.trainer import SFTTrainer

PREFIX = '<tool_call>{"name": "guess_word", "arguments": {"guess": "'
ROWS = wordle_split()[0][:4]


def _config():
    return DemoConfig(serving={"assistant_prefix": PREFIX, "stop": ['"']},
                      policy_kwargs={"choice": "ranked", "spelled": True},
                      env_wrappers=[{"name": "SystemPrompt", "kwargs": {"text": "Play Wordle.", "tools": False}}])


def _spelled(*words):
    return [PREFIX + " ".join(w.upper()) + '"' for w in words]


def test_the_distilled_loss_is_the_kl_from_the_masked_policy_and_moves_mass_by_p_minus_q():
    torch.manual_seed(0)
    logits = torch.randn(3, 7, requires_grad=True)
    targets = torch.tensor([2, 4, 0])
    sets = {0: [1, 2, 5], 2: [0, 3]}  # row 1 keeps its cross-entropy
    allowed = AllowedTokens(torch.tensor([r for r, ids in sets.items() for _ in ids]),
                            torch.tensor([t for ids in sets.values() for t in ids]))
    out = sft_loss(logits, targets, denominator=3.0, allowed=allowed)
    out.loss.backward()
    p = torch.softmax(logits.detach(), -1)
    expected = [0.0] * 3
    for row, ids in sets.items():
        q = torch.zeros(7)
        q[ids] = p[row, ids] / p[row, ids].sum()
        kl = float((q[ids] * (q[ids] / p[row, ids]).log()).sum())  # KL(q || p) = -log P(allowed)
        expected[row] = kl
        assert kl == pytest.approx(-float(p[row, ids].sum().log()), abs=1e-5)
        assert torch.allclose(logits.grad[row], (p[row] - q) / 3.0, atol=1e-6)
    expected[1] = -float(p[1, 4].log())
    one_hot = torch.nn.functional.one_hot(torch.tensor(4), 7).float()
    assert torch.allclose(logits.grad[1], (p[1] - one_hot) / 3.0, atol=1e-6)
    assert float(out.loss.detach()) == pytest.approx(sum(expected) / 3.0, abs=1e-5)
    assert out.distill_count == 2 and out.distill_nll == pytest.approx(expected[0] + expected[2], abs=1e-5)
    top = p.argmax(-1).tolist()
    assert out.correct == (top[0] in sets[0]) + (top[1] == 4) + (top[2] in sets[2])
    # a row whose every token is allowed costs nothing, and nothing allowed is plain cross-entropy
    everything = AllowedTokens(torch.zeros(7, dtype=torch.long), torch.arange(7))
    assert sft_loss(logits[:1], targets[:1], allowed=everything).nll_sum == pytest.approx(0.0, abs=1e-6)
    plain = sft_loss(logits, targets)
    assert sft_loss(logits, targets, allowed=AllowedTokens(torch.zeros(0, dtype=torch.long),
                                                           torch.zeros(0, dtype=torch.long))).nll_sum == plain.nll_sum


def test_the_allowed_tokens_follow_each_turn_and_a_turn_off_the_vocabulary_is_refused(chatml_tokenizer):
    constraint = vocabulary_constraint("mtrl/Wordle-v0", chatml_tokenizer, '"')
    (game,) = learner_demos(_config(), [(ROWS[0], _spelled("crane", "sloth", "pious"))], relabel=False,
                            tokenizer=chatml_tokenizer)
    sets = distill_targets(game, constraint)
    targets = [p for p, m in enumerate(game.loss_mask) if m and p > 0]
    assert len(sets) == len(targets) == sum(b - a for a, b in game.turn_spans)
    for (start, end) in game.turn_spans:
        turn = game.token_ids[start:end]
        assert sorted(sets[targets.index(start)]) == sorted(constraint.allowed_next([]))  # a turn starts afresh
        for p in range(start, end):
            assert game.token_ids[p] in sets[targets.index(p)]
            assert sorted(sets[targets.index(p)]) == sorted(constraint.allowed_next(turn[:p - start]))
    assert sets[targets.index(game.turn_spans[0][1] - 1)] == chatml_tokenizer.encode('"')[-1:]  # the word is whole
    (bad,) = learner_demos(_config(), [(ROWS[1], _spelled("crane", "qqqqq"))], relabel=False,
                           tokenizer=chatml_tokenizer)
    with pytest.raises(ConfigError, match="turn 2 is not an action the constraint"):
        distill_targets(bad, constraint)


def _mean_distill_loss(trainer) -> float:
    """-log P(allowed), averaged over every distilled target of the pool, without training."""
    from mtrl_gym.trainers.grpo.batching import make_micro_batches, target_logits

    seen, total, count = set(), 0.0, 0
    trainer.policy.eval()
    with torch.no_grad():
        for seq in trainer.data.sequences:
            if seq.index not in trainer._distilled or seq.index in seen:
                continue
            seen.add(seq.index)
            for micro in make_micro_batches([seq], 4096, "sorted", pad_token_id=trainer.pad_token_id):
                out = sft_loss(target_logits(trainer.policy, micro.to(trainer.device)), micro.cat("targets"),
                               allowed=trainer._allowed(micro))
                total, count = total + out.distill_nll, count + out.distill_count
    return total / count


def test_sft_with_distill_moves_the_mass_onto_allowed_tokens_and_refuses_games_off_the_vocabulary(
        tmp_path, chatml_tokenizer):
    from mtrl_gym.rollout.trajectory import save_jsonl

    cfg = _config()
    games = learner_demos(cfg, [(row, _spelled(*words)) for row, words in zip(
        ROWS, [("crane", "sloth"), ("pious", "lemon", "crane"), ("slate",), ("irate", "pious")])],
        relabel=False, tokenizer=chatml_tokenizer)
    teacher = learner_demos(cfg, [(ROWS[0], _spelled("slate"))], relabel=False, tokenizer=chatml_tokenizer)
    save_jsonl(games, tmp_path / "games.jsonl")
    save_jsonl(teacher, tmp_path / "demos.jsonl")

    def trainer(name, distill, steps=1, **kw):
        config = SFTConfig(demos=[str(tmp_path / "demos.jsonl")], distill=[str(d) for d in distill],
                           output_dir=str(tmp_path / name), batch_size=4, max_steps=steps,
                           lora={"full_finetune": True},  # a tiny random model's LoRA barely moves in 20 steps
                           tracking={"tracker": "none"}, progress=False, learning_rate=2e-2,
                           serving={"assistant_prefix": PREFIX, "stop": ['"']}, **kw)
        return SFTTrainer(config, model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer)

    run = trainer("run", [tmp_path / "games.jsonl"], steps=20, distill_repeat=3)
    assert len(run.data.sequences) == 1 + 3 * len(games)  # each game three times beside the one demonstration
    assert len(run._distilled) == len(games)
    before = _mean_distill_loss(run)
    metrics = run.train_step()
    assert metrics["train/distilled"] > 0 and metrics["train/distill_loss"] > 0
    for _ in range(19):
        run.train_step()
    after = _mean_distill_loss(run)
    assert after < 0.5 * before, (before, after)

    (bad,) = learner_demos(cfg, [(ROWS[1], _spelled("crane", "qqqqq"))], relabel=False, tokenizer=chatml_tokenizer)
    save_jsonl([bad], tmp_path / "bad.jsonl")
    with pytest.raises(ConfigError, match="not an action the constraint"):
        trainer("bad", [tmp_path / "bad.jsonl"])
    with pytest.raises(ConfigError, match="distill_repeat"):
        SFTConfig(distill=["games.jsonl"], distill_repeat=0)
    with pytest.raises(ConfigError, match="stop string"):
        SFTTrainer(SFTConfig(demos=[str(tmp_path / "demos.jsonl")], distill=[str(tmp_path / "games.jsonl")],
                             output_dir=str(tmp_path / "nostop"), serving={"assistant_prefix": PREFIX},
                             tracking={"tracker": "none"}, progress=False),
                   model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer)


@pytest.mark.slow
def test_distillation_from_the_command_line_on_a_real_constrained_evaluation(tmp_path, capsys):
    """`mtrl-gym eval --constrained` of the real SmolLM2 on training words, `mtrl-gym demos
    --learner --all-games`, then `mtrl-gym sft --distill` for a step, toward the vocabulary and
    toward the words that fit (`--distill-fitting`)."""
    import json

    from mtrl_gym.cli import main

    ev = tmp_path / "ev"
    assert main(["eval", "--model", "smollm2-135m", "-n", "1", "--split", "train", "--limit", "2", "--constrained",
                 "--assistant-prefix", PREFIX, "--stop", '"', "--max-tokens", "12", "--max-turns", "6",
                 "--out", str(ev), "--quiet"]) == 0
    (records,) = (ev / "trajectories").glob("*.jsonl")
    games, demos = tmp_path / "games.jsonl", tmp_path / "demos.jsonl"
    assert main(["demos", "--config", "cpu-sft", "--learner", str(records), "--out", str(games)]) == 0
    solved_only = [json.loads(line) for line in games.read_text().splitlines()]
    assert main(["demos", "--config", "cpu-sft", "--learner", str(records), "--all-games", "--out", str(games)]) == 0
    rows = [json.loads(line) for line in games.read_text().splitlines()]
    assert len(rows) == 2 and len(solved_only) < 2  # every game, not only the solved ones (a 135M model rarely solves)
    assert all(r["terminated"] and sum(r["loss_mask"]) == sum(b - a for a, b in r["turn_spans"]) for r in rows)
    assert main(["demos", "--config", "cpu-sft", "-n", "2", "--out", str(demos)]) == 0
    capsys.readouterr()
    run = tmp_path / "sft"
    assert main(["sft", "--demos", str(demos), "--distill", str(games), "--out", str(run), "--max-steps", "1",
                 "--set", "batch_size=4", "--set", "progress=false"]) == 0
    (step,) = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if '"step"' in line]
    assert step["train/distilled"] > 0 and 0 < step["train/distill_loss"] < step["train/loss"] * 10
    assert (run / "checkpoints" / "step_000001" / "adapter").is_dir()
    fitting = tmp_path / "sft-fitting"
    assert main(["sft", "--demos", str(demos), "--distill", str(games), "--distill-fitting", "--out", str(fitting),
                 "--max-steps", "1", "--set", "batch_size=4", "--set", "progress=false"]) == 0
    (narrow,) = [json.loads(line) for line in (fitting / "metrics.jsonl").read_text().splitlines() if '"step"' in line]
    # the same games and first batch, fewer tokens allowed after the first clue: -log P(allowed) can only rise
    assert narrow["train/distilled"] == step["train/distilled"] and narrow["train/distill_loss"] > step["train/distill_loss"]
    for wrong in (["--relabel", "--all-games"], ["--all-games"]):
        learner = ["--learner", str(records)] if wrong[0] == "--relabel" else []
        assert main(["demos", "--config", "cpu-sft", *learner, *wrong, "--out", str(tmp_path / "x.jsonl")]) != 0
        assert "--all-games" in capsys.readouterr().err


def _fitting_oracle(answer: str, guesses: list[str], form=lambda w: " ".join(w.upper())) -> list[set[str] | None]:
    """Per turn, the answers that give every earlier guess the feedback the secret gave it,
    written by ``form`` (default: spelled out), computed here from the game's feedback function,
    not the env's candidates. ``guesses``: those the env played (a rejected one gives no clue)."""
    from mtrl_gym.envs.wordle.game import answers, feedback

    out: list[set[str] | None] = [None]
    for k in range(1, len(guesses)):
        out.append({form(a) for a in answers()
                    if all(feedback(g, a) == feedback(g, answer) for g in guesses[:k])})
    return out


def test_fitting_guesses_are_the_answers_consistent_with_every_earlier_clue(chatml_tokenizer):
    from mtrl_gym.envs.wordle.profile import fitting_guesses

    words = ["crane", "sloth", "pious", "lemon", "irate", "slate"]  # six misses: the game ends
    (game,) = learner_demos(_config(), [(ROWS[0], _spelled(*words))], relabel=False, tokenizer=chatml_tokenizer)
    fitting = fitting_guesses(game)
    expected = _fitting_oracle(ROWS[0]["answer"], words)
    assert [None if f is None else set(f) for f in fitting] == expected
    assert all(" ".join(ROWS[0]["answer"].upper()) in f for f in fitting[1:])  # the secret always fits
    assert 1 <= len(fitting[-1]) <= len(fitting[1]) < 100  # the clues narrow the 1,923 answers
    (unfinished,) = learner_demos(_config(), [(ROWS[1], _spelled("crane", "sloth"))], relabel=False,
                                  tokenizer=chatml_tokenizer)
    with pytest.raises(ConfigError, match="before the env ended it.*play the games to their end"):
        fitting_guesses(unfinished)


@pytest.mark.parametrize("form", ["word", "tagged"])
def test_fitting_guesses_keep_the_form_each_turn_was_written_in(chatml_tokenizer, form):
    from mtrl_gym.envs.wordle.game import spell
    from mtrl_gym.envs.wordle.profile import fitting_guesses

    write = (lambda w: w) if form == "word" else (lambda w: spell(w, tagged=True))
    words = ["crane", "sloth", "pious", "lemon", "irate", "slate"]
    (game,) = learner_demos(_config(), [(ROWS[0], [PREFIX + write(w) + '"' for w in words])], relabel=False,
                            tokenizer=chatml_tokenizer)
    fitting = fitting_guesses(game)
    assert [None if f is None else set(f) for f in fitting] == _fitting_oracle(ROWS[0]["answer"], words, write)


def test_fitting_guesses_replay_hard_mode_and_refuse_a_game_the_replay_cannot_reproduce(chatml_tokenizer):
    from mtrl_gym.envs.wordle.profile import fitting_guesses

    answer = ROWS[0]["answer"]
    first = "crane"
    # a word that breaks crane's clues: hard mode rejects it (no guess used, no clue)
    after_first = _fitting_oracle(answer, [first, first])[1]
    breaks = next(w for w in ("sloth", "pious", "lemon", "dumpy") if " ".join(w.upper()) not in after_first)
    played = [first, breaks, *_fitting_oracle_words(answer, first)[:2], answer]  # solved: the game ends
    hard = DemoConfig(env="mtrl/Wordle-Hard-v0", serving=_config().serving, policy_kwargs={"choice": "ranked"},
                      env_wrappers=_config().env_wrappers)
    (game,) = learner_demos(hard, [(ROWS[0], _spelled(*played))], relabel=False, tokenizer=chatml_tokenizer)
    assert game.turn_info[1]["error"] == "hard_mode"
    fitting = fitting_guesses(game)
    assert fitting[2] == fitting[1]  # the rejected turn gave no clue
    accepted = [w for w in played if w != breaks]
    oracle = _fitting_oracle(answer, accepted)
    assert set(fitting[1]) == oracle[1] and set(fitting[3]) == oracle[2]
    # the same game played with hard_mode as an argument of the plain id: a bare replay accepts the word
    kwargs = DemoConfig(serving=_config().serving, policy_kwargs={"choice": "ranked"},
                        env_wrappers=_config().env_wrappers, env_kwargs={"hard_mode": True})
    (odd,) = learner_demos(kwargs, [(ROWS[0], _spelled(*played))], relabel=False, tokenizer=chatml_tokenizer)
    with pytest.raises(ConfigError, match="turn 2 ended with None in the replay, 'hard_mode' when played"):
        fitting_guesses(odd)


def _fitting_oracle_words(answer: str, first: str) -> list[str]:
    """Answers that fit ``first``'s clue, none of them the secret (so the game does not end early)."""
    return [w.replace(" ", "").lower() for w in sorted(_fitting_oracle(answer, [first, first])[1])
            if w.replace(" ", "").lower() != answer]


def test_fitting_targets_narrow_to_the_fitting_words_until_the_played_guess_leaves_them(chatml_tokenizer):
    from mtrl_gym.envs.wordle.profile import fitting_guesses
    from mtrl_gym.rollout.constraint import CompletionConstraint

    words = ["crane", "sloth", "pious", "lemon", "irate", "slate"]
    constraint = vocabulary_constraint("mtrl/Wordle-v0", chatml_tokenizer, '"')
    (game,) = learner_demos(_config(), [(ROWS[0], _spelled(*words))], relabel=False, tokenizer=chatml_tokenizer)
    fitting = [None if f is None else CompletionConstraint.from_texts([t + '"' for t in f], chatml_tokenizer)
               for f in fitting_guesses(game)]
    sets = distill_targets(game, constraint, fitting)
    plain = distill_targets(game, constraint)
    targets = [p for p, m in enumerate(game.loss_mask) if m and p > 0]
    oracle = _fitting_oracle(ROWS[0]["answer"], words)
    narrowed = 0
    for turn, (start, end) in enumerate(game.turn_spans):
        encoded = [chatml_tokenizer.encode(t + '"', add_special_tokens=False) for t in oracle[turn] or ()]
        for p in range(start, end):
            prefix = game.token_ids[start:p]
            fits = {e[len(prefix)] for e in encoded if len(e) > len(prefix) and e[:len(prefix)] == prefix}
            got = sets[targets.index(p)]
            assert sorted(got) == sorted(fits or plain[targets.index(p)])
            narrowed += bool(fits) and len(fits) < len(plain[targets.index(p)])
    assert sets[:game.turn_spans[0][1] - game.turn_spans[0][0]] == plain[:game.turn_spans[0][1] - game.turn_spans[0][0]]
    assert narrowed >= len(words) - 1  # at least the first letter of every clued turn


def test_sft_with_distill_fitting_scores_fewer_tokens_allowed_and_needs_distill_games(tmp_path, chatml_tokenizer):
    from mtrl_gym.rollout.trajectory import save_jsonl

    cfg = _config()
    games = learner_demos(cfg, [(row, _spelled(*words)) for row, words in zip(
        ROWS, [("crane", "sloth", "pious", "lemon", "irate", "slate"), ("slate", "crane", "pious", "lemon", "irate",
                                                                          "sloth")])], relabel=False,
        tokenizer=chatml_tokenizer)
    save_jsonl(games, tmp_path / "games.jsonl")
    save_jsonl(learner_demos(cfg, [(ROWS[2], _spelled("slate"))], relabel=False, tokenizer=chatml_tokenizer),
               tmp_path / "demos.jsonl")

    def trainer(name, **kw):
        config = SFTConfig(demos=[str(tmp_path / "demos.jsonl")], distill=[str(tmp_path / "games.jsonl")], output_dir=str(tmp_path / name), batch_size=2,
                           max_steps=1, tracking={"tracker": "none"}, progress=False,
                           serving={"assistant_prefix": PREFIX, "stop": ['"']}, **kw)
        return SFTTrainer(config, model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer)

    vocabulary, fitting = trainer("vocabulary"), trainer("fitting", distill_fitting=True)
    for i, own in vocabulary._distilled.items():
        narrow = fitting._distilled[i]
        assert torch.equal(own.target.unique(), narrow.target.unique())  # every target keeps an allowed set
        assert len(narrow.token) < len(own.token)
    # the same model and batch: -log P(fitting tokens) >= -log P(vocabulary tokens), strictly where narrowed
    assert fitting.train_step()["train/distill_loss"] > vocabulary.train_step()["train/distill_loss"]
    (unfinished,) = learner_demos(cfg, [(ROWS[1], _spelled("crane", "sloth"))], relabel=False,
                                  tokenizer=chatml_tokenizer)
    save_jsonl([unfinished], tmp_path / "unfinished.jsonl")
    with pytest.raises(ConfigError, match="before the env ended it"):
        SFTTrainer(SFTConfig(demos=[str(tmp_path / "demos.jsonl")], distill=[str(tmp_path / "unfinished.jsonl")],
                             distill_fitting=True, output_dir=str(tmp_path / "unfinished"), tracking={"tracker": "none"},
                             serving={"assistant_prefix": PREFIX, "stop": ['"']}, progress=False))  # before a model loads
    from mtrl_gym import profile_of

    assert profile_of("mtrl/WordleDuel-v0").fitting_actions is None  # a duel's games replay in no single-seat env
    with pytest.raises(ConfigError, match="distill_fitting"):
        SFTConfig(demos=["d.jsonl"], distill_fitting=True)
    with pytest.raises(ConfigError, match="distill_fitting"):
        SFTConfig(demos=["d.jsonl"], distill=["g.jsonl"], distill_fitting="maybe")
