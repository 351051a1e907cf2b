"""Demonstrations, the SFT stage, GRPO from an SFT adapter and the collapse guards, on tiny models."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from mtrl_gym.envs.wordle.profile import wordle_split
from mtrl_gym.envs.wordle.solver import format_guess
from mtrl_gym.envs.wordle.teacher import ConsistentTeacher
from mtrl_gym.error import ConfigError
from mtrl_gym.trainers.demos import DemoConfig
from mtrl_gym.trainers.grpo.diversity import diversity_penalties, top_action

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from tiny_models import build_tiny_llama

from mtrl_gym.trainers.demos import make_demos, teacher_tokens
from mtrl_gym.trainers.grpo.batching import make_micro_batches, target_logits
from mtrl_gym.rollout.engine import RolloutConfig, RolloutEngine
from mtrl_gym.rollout.samplers.base import Sampler, SampleResult, SamplingParams
from mtrl_gym.trainers.sft.config import SFTConfig
from mtrl_gym.trainers.sft.data import demo_sequences
from mtrl_gym.trainers.sft.loss import sft_loss
from mtrl_gym.trainers.sft.trainer import SFTTrainer
from mtrl_gym.wrappers import SystemPrompt

PREFIX = '<tool_call>{"name": "guess_word", "arguments": {"guess": "'


# ---------------------------------------------------------------------------- the teacher


@pytest.mark.parametrize("choice, spelled, tagged", [("ranked", False, False), ("random", False, False),
                                                     ("ranked", True, False), ("ranked", False, True)])
def test_teacher_games_are_all_valid_consistent_and_almost_all_solved(choice, spelled, tagged):
    env = gymnasium.make("mtrl/Wordle-v0")
    teacher = ConsistentTeacher(choice, spelled=spelled, tagged=tagged)
    spelled = spelled or tagged
    turns = valid = consistent = solved = 0
    train = wordle_split()[0][:300]
    for i, row in enumerate(train):
        obs, info = env.reset(seed=i, options={"task": row})
        teacher.reset(info, np.random.default_rng(i))
        done = False
        while not done:
            obs, _, done, _, info = env.step(teacher(obs, info))
            turns += 1
            valid += info["valid"] and not info["repeated"] and info.get("spelled", False) == spelled
            consistent += info["clue_violations"] == 0
        solved += info["solved"]
    assert valid == turns and consistent == turns
    assert solved / len(train) >= 0.95


def test_teacher_rejects_bad_options():
    with pytest.raises(ConfigError, match="`choice` must be one of"):
        ConsistentTeacher("greedy")
    with pytest.raises(ConfigError, match="openers must be allowed"):
        ConsistentTeacher(openers=("zzzzz",))
    with pytest.raises(ConfigError, match='a list of words or "answers"'):
        ConsistentTeacher(openers="slate")


def test_a_teacher_opening_from_the_answer_list_spreads_its_first_guess_and_then_plays_ranked():
    from mtrl_gym.envs.wordle import game

    env = gymnasium.make("mtrl/Wordle-v0")
    teacher, ranked = ConsistentTeacher(openers="answers"), ConsistentTeacher(openers=())
    firsts = []
    for i, row in enumerate(wordle_split()[0][:40]):
        obs, info = env.reset(seed=i, options={"task": row})
        teacher.reset(info, np.random.default_rng(i))
        obs, _, _, _, info = env.step(teacher(obs, info))
        firsts.append(info["guess"])
        ranked.reset({"prior_guesses": [{"guess": info["guess"], "feedback": info["feedback"]}]},
                     np.random.default_rng(0))
        assert teacher(obs, info) == format_guess(ranked.choose()) or info["solved"]  # then the ranked pick
    assert set(firsts) <= set(game.answers()) and len(set(firsts)) >= 35


# ---------------------------------------------------------------------------- demonstrations


def test_demonstrations_from_the_val_split_are_refused():
    with pytest.raises(ConfigError, match="training tasks only, got split='val'"):
        DemoConfig(split="val")
    with pytest.raises(ConfigError, match="training tasks only"):
        DemoConfig(env="mtrl/SOP-DangerousGoods-v0", env_kwargs={"split": "val"})


def _wordle_demos(tokenizer, n=4):
    config = DemoConfig(num_episodes=n, serving={"assistant_prefix": PREFIX, "stop": ['"']},
                        env_wrappers=[{"name": "SystemPrompt", "kwargs": {"text": "Play Wordle.", "tools": False}}])
    return make_demos(config, tokenizer)


def _one_turn_demos(tokenizer, wrappers=(), n=12, seed=0):
    """The main job's lexicon data: one spelled guess each, the teacher picking at random without openers."""
    config = DemoConfig(num_episodes=n, serving={"assistant_prefix": PREFIX, "stop": ['"']}, max_turns=1, seed=seed,
                        policy_kwargs={"choice": "random", "openers": [], "spelled": True},
                        env_wrappers=[{"name": "SystemPrompt", "kwargs": {"text": "Play Wordle.", "tools": False}},
                                      *wrappers])
    return make_demos(config, tokenizer)


def test_lexicon_demonstrations_spell_one_random_answer_word_each(chatml_tokenizer):
    from mtrl_gym.envs.wordle import game

    demos = _one_turn_demos(chatml_tokenizer)
    infos = [t.final_info for t in demos]
    assert all(len(t.turn_spans) == 1 and t.trainable_tokens > 0 for t in demos)
    assert all(i["guesses_used"] == 1 and i["valid"] and i["spelled"] for i in infos)
    words = [i["guess"] for i in infos]
    assert set(words) <= set(game.answers()) and len(set(words)) >= 10  # spread words, not the opener list
    from mtrl_gym.envs.wordle.teacher import STRONG_OPENERS

    assert len(set(words) - set(STRONG_OPENERS)) >= 8
    again = [t.final_info["guess"] for t in _one_turn_demos(chatml_tokenizer)]
    other = [t.final_info["guess"] for t in _one_turn_demos(chatml_tokenizer, seed=10_000)]
    assert again == words and other != words  # seeded


def test_board_demonstrations_answer_random_boards_with_a_word_that_fits(chatml_tokenizer):
    boards = [{"name": "PriorGuesses", "kwargs": {"num_priors": [1, 4], "policy": "random"}}]
    infos = [t.final_info for t in _one_turn_demos(chatml_tokenizer, boards, n=16)]
    assert {i["guesses_used"] for i in infos} <= {2, 3, 4, 5} and len({i["guesses_used"] for i in infos}) >= 2
    assert all(i["valid"] and not i["repeated"] and i["clue_violations"] == 0 for i in infos)


def test_the_demos_cli_adds_wrappers_and_refuses_a_bad_one(tmp_path, capsys):
    from mtrl_gym.cli import main

    out = tmp_path / "d.jsonl"
    assert main(["demos", "--wrapper", "{not json", "--out", str(out)]) != 0
    assert "--wrapper must be a wrapper name or a JSON object" in capsys.readouterr().err and not out.exists()
    assert main(["demos", "--wrapper", '{"kwargs": {}}', "--out", str(out)]) != 0
    assert "`--wrapper` must be a wrapper name or {'name': ..., 'kwargs'" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_the_demos_cli_writes_single_board_examples(tmp_path):
    """The main job's board data from the command line, with the real SmolLM2 tokenizer."""
    import json

    from mtrl_gym.cli import main

    out = tmp_path / "boards.jsonl"
    wrapper = '{"name": "PriorGuesses", "kwargs": {"num_priors": [2, 2], "policy": "random"}}'
    assert main(["demos", "--config", "cpu-sft", "--policy-kwargs", '{"spelled": true}', "--wrapper", wrapper,
                 "--max-turns", "1", "--seed", "7", "-n", "3", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["final_info"]["guesses_used"] for r in rows] == [3, 3, 3]
    assert all(r["final_info"]["clue_violations"] == 0 and r["final_info"]["spelled"] for r in rows)
    assert json.loads((tmp_path / "boards.jsonl.meta.json").read_text())["config"]["seed"] == 7


class _Replay(Sampler):
    """Returns given token lists, one per turn, per session (in the order sessions first appear)."""

    def __init__(self, turns):
        self.turns, self.sessions = turns, {}

    def sample(self, requests):
        out = []
        for r in requests:
            k = self.sessions.setdefault(r.session_id, len(self.sessions))
            ids = self.turns[k].pop(0)
            out.append(SampleResult(list(ids), [0.0] * len(ids), "stop", prompt_tokens=len(r.prompt_ids)))
        return out


def test_demonstration_tokens_equal_the_rollout_engines_for_the_same_actions(chatml_tokenizer):
    demos = _wordle_demos(chatml_tokenizer)
    assert all(not t.failed and t.metrics["success"] for t in demos)
    # the sampled spans are exactly the teacher's words and the stop quote
    for t in demos:
        words = [m["content"].removeprefix(PREFIX) for m in t.messages if m["role"] == "assistant"]
        spans = [chatml_tokenizer.decode(t.token_ids[a:b]) for a, b in t.turn_spans]
        assert spans == words and all(w.endswith('"') and len(w) == 6 for w in words)
        assert sum(t.loss_mask) == sum(b - a for a, b in t.turn_spans)
    # a plain engine fed the same turn tokens builds the same token ids and loss mask
    turns = [[t.token_ids[a:b] for a, b in t.turn_spans] for t in demos]
    config = RolloutConfig(sampling=SamplingParams(temperature=0.0, stop=('"',)), assistant_prefix=PREFIX,
                           seed=0, unfinished_reward="sum")
    rows = wordle_split()[0][:len(demos)]
    with RolloutEngine("mtrl/Wordle-v0", _Replay(turns), chatml_tokenizer, config,
                       wrappers=[lambda e: SystemPrompt(e, "Play Wordle.", tools=False)]) as engine:
        replayed = engine.collect(rows, seed=0)
    for a, b in zip(demos, replayed):
        assert a.token_ids == b.token_ids and a.loss_mask == b.loss_mask and a.turn_rewards == b.turn_rewards


def test_teacher_tokens_cut_at_the_stop_string_or_close_the_turn(chatml_tokenizer):
    ids, _ = teacher_tokens(chatml_tokenizer, PREFIX + 'crane"}}</tool_call>', assistant_prefix=PREFIX, stop=['"'])
    assert chatml_tokenizer.decode(ids) == 'crane"'
    ids, _ = teacher_tokens(chatml_tokenizer, "hello", end_token_id=2)
    assert ids[-1] == 2 and chatml_tokenizer.decode(ids[:-1]) == "hello"
    with pytest.raises(ConfigError, match="does not start with the format prefill"):
        teacher_tokens(chatml_tokenizer, "crane", assistant_prefix=PREFIX)


# ---------------------------------------------------------------------------- SFT


def test_sft_loss_equals_token_cross_entropy_over_assistant_tokens(chatml_tokenizer):
    demos = _wordle_demos(chatml_tokenizer, n=3)
    model = build_tiny_llama(len(chatml_tokenizer), seed=1)
    seqs = demo_sequences(demos)
    total = sum(s.num_targets for s in seqs)
    got = 0.0
    for micro in make_micro_batches(seqs, 100_000, "shared_prefix", pad_token_id=2):
        out = sft_loss(target_logits(model, micro), micro.cat("targets"), denominator=total)
        got += float(out.loss)
    # by hand: full forward of each trajectory, cross-entropy at the loss-masked tokens
    nll, count = 0.0, 0
    for t in demos:
        ids = torch.tensor([t.token_ids])
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0].float()
        mask = torch.tensor(t.loss_mask[1:], dtype=torch.bool)
        ce = torch.nn.functional.cross_entropy(logits[:-1][mask], ids[0, 1:][mask], reduction="sum")
        nll, count = nll + float(ce), count + int(mask.sum())
    assert count == total
    assert got == pytest.approx(nll / count, rel=1e-4)


def test_sft_loss_decreases_on_a_tiny_model_and_resumes(tmp_path, chatml_tokenizer):
    demos = _wordle_demos(chatml_tokenizer, n=4)
    config = SFTConfig(output_dir=str(tmp_path / "sft"), batch_size=2, max_steps=30, learning_rate=2e-2,
                       lora={"rank": 4, "alpha": 8}, tracking={"tracker": "none"}, progress=False,
                       optimizer={"warmup_steps": 0, "lr_schedule": "constant"}, checkpoints={"save_every": 0})
    trainer = SFTTrainer(config, model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer,
                         demos=demos)
    summary = trainer.train()
    import json

    rows = [json.loads(line) for line in (tmp_path / "sft" / "metrics.jsonl").read_text().splitlines()]
    first, last = np.mean([r["train/loss"] for r in rows[:3]]), np.mean([r["train/loss"] for r in rows[-3:]])
    assert last < first - 0.1  # measured: 6.18 -> 5.98 (a 2-layer, 32-wide random model, LoRA r4)
    assert rows[-1]["train/token_accuracy"] >= rows[0]["train/token_accuracy"]
    assert (tmp_path / "sft" / "checkpoints" / "step_000030" / "adapter" / "adapter_config.json").is_file()
    assert summary["status"] == "FINISHED" and summary["steps"] == 30


def test_sft_resume_takes_the_saved_settings_and_a_mismatch_is_a_clear_error(tmp_path, chatml_tokenizer):
    import argparse
    import dataclasses

    from mtrl_gym.cli.sft import resolve_config

    demos = _wordle_demos(chatml_tokenizer, n=2)
    config = SFTConfig(output_dir=str(tmp_path / "sft"), batch_size=2, max_steps=2,
                       lora={"rank": 4, "alpha": 8, "layers": 1}, tracking={"tracker": "none"}, progress=False,
                       checkpoints={"save_every": 0})
    SFTTrainer(config, model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer,
               demos=demos).train()
    run = str(tmp_path / "sft")
    args = argparse.Namespace(demos=["d.jsonl"], distill=[], distill_fitting=False, out=None, max_steps=4, max_minutes=None, config=None,
                              resume=run, overrides=[])
    resumed = resolve_config(args)  # `mtrl-gym sft --demos d.jsonl --resume RUN --max-steps 4`
    assert resumed.distill == [] and resolve_config(argparse.Namespace(**{
        **vars(args), "resume": None, "distill": ["g.jsonl"]})).distill == ["g.jsonl"]  # --distill g.jsonl
    assert (resumed.lora.rank, resumed.lora.layers, resumed.output_dir, resumed.max_steps) == (4, 1, run, 4)
    wrong = dataclasses.replace(resumed, lora=dataclasses.replace(resumed.lora, rank=8, alpha=16, layers=None))
    with pytest.raises(ConfigError, match="does not fit this run's model and LoRA set-up"):
        SFTTrainer(wrong, model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer,
                   demos=demos, resume=run)
    args.resume = str(tmp_path / "nothing")
    with pytest.raises(ConfigError, match="--resume: no checkpoint in"):
        resolve_config(args)


def test_sft_config_errors_name_the_value():
    with pytest.raises(ConfigError, match="`batch_size` must be an integer >= 1, got 0"):
        SFTConfig(batch_size=0)
    with pytest.raises(ConfigError, match="unknown SFT config key"):
        SFTConfig.from_dict({"batchsize": 4})


def test_sop_demonstrations_train_a_tiny_model_one_step(tmp_path, chatml_tokenizer):
    config = DemoConfig(env="mtrl/SOP-DangerousGoods-v0", num_episodes=1, max_turns=2, max_episode_tokens=200_000)
    demos = make_demos(config, chatml_tokenizer)
    assert demos[0].trainable_tokens > 0 and not demos[0].failed
    assert demos[0].messages[2]["content"].startswith("<tool_call>")  # the reference procedure's call
    model = build_tiny_llama(len(chatml_tokenizer), seed=0, max_positions=200_000)
    sft = SFTConfig(output_dir=str(tmp_path / "sft"), batch_size=1, max_steps=1, lora={"rank": 4, "alpha": 8},
                    tracking={"tracker": "none"}, progress=False, micro_batch_tokens=200_000)
    trainer = SFTTrainer(sft, model=model, tokenizer=chatml_tokenizer, demos=demos)
    before = {n: p.detach().clone() for n, p in trainer.policy.named_parameters() if "lora_B" in n}
    trainer.train()
    after = {n: p for n, p in trainer.policy.named_parameters() if "lora_B" in n}
    assert any(not torch.equal(before[n], after[n]) for n in before)


# ---------------------------------------------------------------------------- GRPO from SFT


def test_grpo_starts_from_the_sft_adapter(tmp_path, chatml_tokenizer):
    from mtrl_gym.trainers.grpo.config import GRPOConfig
    from mtrl_gym.trainers.grpo.trainer import GRPOTrainer, load_init_adapter

    demos = _wordle_demos(chatml_tokenizer, n=2)
    sft = SFTTrainer(SFTConfig(output_dir=str(tmp_path / "sft"), batch_size=2, max_steps=2,
                               lora={"rank": 4, "alpha": 8}, tracking={"tracker": "none"}, progress=False,
                               learning_rate=1e-2),
                     model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer, demos=demos)
    adapter = sft.train()["adapter"]
    sft_weights = {n: p.detach().clone() for n, p in sft.policy.named_parameters() if "lora_" in n}
    config = GRPOConfig(output_dir=str(tmp_path / "grpo"), init_adapter=adapter, global_batch_size=1, group_size=2,
                        max_steps=1, tracking={"tracker": "none"}, progress=False, validation={"every": 0},
                        objective={"kl_coef": 0.1},
                        serving={"max_new_tokens": 3, "assistant_prefix": PREFIX, "stop": ['"']},
                        episode={"max_turns": 1})
    trainer = GRPOTrainer(config, model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer)
    loaded = {n: p for n, p in trainer.policy.named_parameters() if "lora_" in n}
    assert loaded.keys() == sft_weights.keys()
    assert all(torch.equal(loaded[n], sft_weights[n]) for n in loaded)
    assert all(p.requires_grad for p in loaded.values())
    # the KL reference is the SFT policy (a frozen copy), not the base model
    ids = torch.tensor([[1, 5, 7, 9]])
    ref = trainer._reference(lambda m: m(input_ids=ids).logits)
    with torch.no_grad():
        assert torch.allclose(ref, trainer.policy(input_ids=ids).logits)
    with pytest.raises(ConfigError, match="is not a LoRA adapter folder"):
        load_init_adapter(build_tiny_llama(len(chatml_tokenizer)), tmp_path)


# ---------------------------------------------------------------------------- collapse guards


def test_group_repeat_penalty_by_hand():
    # group of 4: "a" played by two episodes -> each pays 0.3 * 1/3
    assert diversity_penalties([["a"], ["a"], ["b"], ["c"]], 4, coef_group=0.3) == [0.1, 0.1, 0.0, 0.0]
    # two-turn episodes: turn actions each compared with the other episodes' actions at any turn
    p = diversity_penalties([["a", "b"], ["b", "c"]], 2, coef_group=1.0)
    assert p == [0.5, 0.5]


def test_batch_dominance_penalty_by_hand():
    # shares: a 4/6, b 1/6, c 1/6; threshold 0.3 -> a pays (2/3 - 0.3) / 0.7 = 0.5238
    p = diversity_penalties([["a", "a"], ["a", "b"], ["a"], ["c"]], 2, coef_batch=1.0, threshold=0.3)
    assert p == pytest.approx([0.5238095238, 0.2619047619, 0.5238095238, 0.0])
    assert top_action([["a", "a"], ["a", "b"], ["a"], ["c"]]) == ("a", pytest.approx(4 / 6))
    # nothing is paid while no action is over the threshold
    assert diversity_penalties([["a"], ["b"], ["c"], ["d"]], 2, coef_batch=1.0, threshold=0.3) == [0.0] * 4


def test_penalties_separate_a_collapsed_group():
    # every rollout played "green"; the one that played it once only pays less
    p = diversity_penalties([["green", "green"], ["green", "crane"], ["green", "green"]], 3, coef_batch=1.0,
                            threshold=0.1)
    assert p[1] < p[0] == p[2]


def test_diversity_errors():
    with pytest.raises(ConfigError, match="do not split into groups of 4"):
        diversity_penalties([["a"]] * 3, 4)
    with pytest.raises(ConfigError, match="threshold must be in"):
        diversity_penalties([["a"]], 1, threshold=1.0)


# ---------------------------------------------------------------------------- serving settings of an SFT run


def test_an_sft_adapter_is_evaluated_in_the_format_its_demonstrations_were_made_in(tmp_path, chatml_tokenizer):
    """The demonstrations' serving settings travel: demos .meta.json -> the SFT run's serving.yaml ->
    `mtrl-gym eval --adapter`, which serves the adapter with that prefill and stop string."""
    from mtrl_gym.cli import build_parser
    from mtrl_gym.cli.eval import build_runs
    from mtrl_gym.rollout.serving import ServingSettings, load_serving
    from mtrl_gym.trainers.demos import write_demos

    config = DemoConfig(num_episodes=2, serving={"assistant_prefix": PREFIX, "stop": ['"'], "max_new_tokens": 6},
                        max_turns=1)
    path = write_demos(make_demos(config, chatml_tokenizer), tmp_path / "demos.jsonl", config)
    sft = SFTTrainer(SFTConfig(demos=[str(path)], output_dir=str(tmp_path / "sft"), batch_size=2, max_steps=1,
                               lora={"rank": 4, "alpha": 8}, tracking={"tracker": "none"}, progress=False),
                     model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer)
    adapter = sft.train()["adapter"]
    saved = load_serving(tmp_path / "sft")
    assert saved == ServingSettings(assistant_prefix=PREFIX, stop=['"'], max_new_tokens=6)
    logged: list[str] = []
    runs = build_runs(build_parser().parse_args(["eval", "--model", "smollm2-135m", "--adapter", adapter]),
                      str(tmp_path / "eval"), log=logged.append)
    trained = next(r for r in runs if r.adapter)
    assert (trained.serving.assistant_prefix, trained.serving.stop, trained.serving.max_new_tokens) == (
        PREFIX, ['"'], 6)
    assert "serving settings of" in "\n".join(logged)
