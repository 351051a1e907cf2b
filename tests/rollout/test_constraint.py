"""Constrained decoding: the prefix tree, the HF sampler's masking and log-probs, and
dictionary-decoding evaluation runs (every guess a dictionary word, scored by the bare env)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtrl_gym.error import ConfigError
from mtrl_gym.rollout.constraint import CompletionConstraint

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from mtrl_gym.evaluation import EvalConfig, RunSpec, evaluate, read_records  # noqa: E402
from mtrl_gym.rollout.samplers.base import SampleRequest, SamplingParams  # noqa: E402
from mtrl_gym.rollout.samplers.hf import HFSampler  # noqa: E402
from mtrl_gym.rollout.samplers.openai import OpenAISampler  # noqa: E402

WORDS = ["crane", "slate", "trace", "pious", "zebra"]
PREFIX = '<tool_call>{"name": "guess_word", "arguments": {"guess": "'


@given(st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=4), min_size=1, max_size=12))
@settings(max_examples=200, deadline=None)
def test_the_tree_accepts_exactly_its_completions(seqs):
    seqs = [s + [99] for s in seqs]  # a common end token: no completion is a prefix of another
    c = CompletionConstraint(seqs)
    assert c.size == len({tuple(s) for s in seqs})
    for s in seqs:
        assert c.is_complete(s)
        for i in range(len(s)):
            assert s[i] in c.allowed_next(s[:i])
            assert not c.is_complete(s[:i])
    # every path the tree allows ends in a listed completion
    frontier = [[]]
    while frontier:
        path = frontier.pop()
        nxt = c.allowed_next(path)
        if nxt is None:
            assert path in seqs
        else:
            frontier.extend(path + [t] for t in nxt)


def test_prefixes_and_empty_lists_are_refused():
    with pytest.raises(ConfigError, match="extends a shorter"):
        CompletionConstraint([[1, 2], [1, 2, 3]])
    with pytest.raises(ConfigError, match="is a prefix of a longer"):
        CompletionConstraint([[1, 2, 3], [1, 2]])
    with pytest.raises(ConfigError, match="no tokens"):
        CompletionConstraint([[]])
    with pytest.raises(ConfigError, match="at least one"):
        CompletionConstraint([])


def test_from_texts_keeps_only_what_fits_the_token_budget(chatml_tokenizer):
    tok = chatml_tokenizer
    texts = ['crane"', 'C R A N E"']
    lengths = [len(tok.encode(t, add_special_tokens=False)) for t in texts]
    assert lengths[0] < lengths[1]
    assert CompletionConstraint.from_texts(texts, tok).size == 2
    fit = CompletionConstraint.from_texts(texts, tok, max_tokens=lengths[0])
    assert fit.size == 1 and fit.is_complete(tok.encode(texts[0], add_special_tokens=False))
    with pytest.raises(ConfigError, match="fits in 1 tokens; raise max_new_tokens"):
        CompletionConstraint.from_texts(texts, tok, max_tokens=1)


def _words(tok):
    return CompletionConstraint.from_texts((w + '"' for w in WORDS), tok, name="test")


def test_hf_sampling_only_produces_allowed_completions(tiny_model, chatml_tokenizer):
    tok = chatml_tokenizer
    sampler = HFSampler(tiny_model, tok)
    params = SamplingParams(temperature=1.0, max_new_tokens=12, stop=('"',), constraint=_words(tok))
    prompt = tok.encode("Guess a word: " + PREFIX, add_special_tokens=False)
    results = sampler.sample([SampleRequest(prompt, SamplingParams(**{**params.__dict__, "seed": s}))
                              for s in range(40)])
    texts = {tok.decode(r.token_ids) for r in results}
    assert texts <= {w + '"' for w in WORDS}
    assert len(texts) >= 2  # sampling, not a fixed pick
    assert all(r.finish_reason == "stop" for r in results)


def test_constrained_logprobs_are_under_the_renormalised_distribution(tiny_model, chatml_tokenizer):
    tok = chatml_tokenizer
    constraint = _words(tok)
    prompt = tok.encode("Guess a word: " + PREFIX, add_special_tokens=False)
    (r,) = HFSampler(tiny_model, tok).sample([SampleRequest(prompt, SamplingParams(
        temperature=0.7, max_new_tokens=12, stop=('"',), constraint=constraint, seed=3))])
    ids = prompt + r.token_ids
    with torch.no_grad():
        logits = tiny_model(input_ids=torch.tensor([ids])).logits[0].float() / 0.7
    for i, token in enumerate(r.token_ids):
        allowed = constraint.allowed_next(r.token_ids[:i])
        row = logits[len(prompt) + i - 1]
        expected = float(row[token] - torch.logsumexp(row[allowed], dim=0))
        assert r.logprobs[i] == pytest.approx(expected, abs=1e-4)
        if len(allowed) == 1:
            assert r.logprobs[i] == pytest.approx(0.0, abs=1e-6)
    # greedy picks the allowed argmax, whatever the unconstrained argmax is
    (g,) = HFSampler(tiny_model, tok).sample([SampleRequest(prompt, SamplingParams(
        temperature=0.0, max_new_tokens=12, stop=('"',), constraint=constraint))])
    first = constraint.allowed_next([])
    row = logits[len(prompt) - 1]
    assert g.token_ids[0] == first[int(torch.argmax(row[first]))]
    assert math.isfinite(sum(g.logprobs))


def test_samplers_without_constraints_refuse_them():
    params = SamplingParams(constraint=CompletionConstraint([[1, 2]]))
    with pytest.raises(ConfigError, match="cannot constrain decoding"):
        OpenAISampler("http://127.0.0.1:9", model="m").sample([SampleRequest([1, 2, 3], params)])


def _cpu_run(name, tok, sampler, **kw):
    return RunSpec(name, sampler=sampler, tokenizer=tok,
                   serving={"max_new_tokens": 8, "assistant_prefix": PREFIX, "stop": ('"',), "tools": False, **kw})


def test_a_constrained_wordle_run_guesses_only_dictionary_words(tmp_path, tiny_model, chatml_tokenizer):
    tok = chatml_tokenizer
    runs = [_cpu_run("plain", tok, HFSampler(tiny_model, tok)),
            _cpu_run("dict", tok, HFSampler(tiny_model, tok), constrained=True)]
    evaluate("mtrl/Wordle-v0", runs, split="val", limit=3, out_dir=tmp_path, report=False,
             config=EvalConfig(n=2, max_turns=3, batch_tasks=3, report_examples=0))
    plain = read_records(tmp_path / "trajectories" / "plain.jsonl")
    constrained = read_records(tmp_path / "trajectories" / "dict.jsonl")
    assert len(constrained) == 6
    from mtrl_gym.envs.wordle import game
    from mtrl_gym.envs.wordle.profile import guess_texts

    allowed = set(guess_texts())
    words = game.allowed_guesses()
    assert allowed == set(words) | {game.spell(w) for w in words} | {game.spell(w, tagged=True) for w in words}
    guesses = [m["content"] for r in constrained for m in r["messages"] if m["role"] == "assistant"]
    played = [g.removeprefix(PREFIX).removesuffix('"') for g in guesses]
    assert played and all(g in allowed for g in played), [g for g in played if g not in allowed]
    # the random tiny model's plain guesses are (almost surely) not words
    plain_guesses = [m["content"] for r in plain for m in r["messages"] if m["role"] == "assistant"]
    assert not all(g.removeprefix(PREFIX).removesuffix('"') in allowed for g in plain_guesses)


def test_constrained_runs_need_a_model_a_stop_and_a_vocabulary(tmp_path, tiny_model, chatml_tokenizer):
    with pytest.raises(ConfigError, match="needs a model run"):
        RunSpec("p", policy="solver", serving={"constrained": True})
    with pytest.raises(ConfigError, match="stop"):
        RunSpec("m", model="smollm2-135m", serving={"constrained": True})
    tok = chatml_tokenizer
    with pytest.raises(ConfigError, match="declares no action vocabulary"):
        evaluate("mtrl/SOP-DangerousGoods-v0", [_cpu_run("d", tok, HFSampler(tiny_model, tok), constrained=True)],
                 split="val", limit=1, out_dir=tmp_path, report=False, config=EvalConfig(n=1, max_turns=1))


# ---------------------------------------------------------------------------- constrained GRPO sampling


def test_grpo_with_constrained_sampling_trains_the_unconstrained_policy(tmp_path, chatml_tokenizer):
    """Every training rollout is an allowed text; old log-probs are recomputed; the TIS weights
    p / q of the constrained samples are <= 1; the LoRA weights move."""
    import json

    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    from tiny_models import build_tiny_llama

    from mtrl_gym.envs.wordle.profile import guess_texts
    from mtrl_gym.trainers.grpo.config import GRPOConfig
    from mtrl_gym.trainers.grpo.trainer import GRPOTrainer

    config = GRPOConfig(output_dir=str(tmp_path / "grpo"), global_batch_size=2, group_size=2, max_steps=1,
                        tracking={"tracker": "none", "log_trajectories": 4}, progress=False, validation={"every": 0},
                        serving={"max_new_tokens": 10, "assistant_prefix": PREFIX, "stop": ['"'], "constrained": True},
                        episode={"max_turns": 2, "unfinished_reward": "sum"}, learning_rate=1e-2,
                        env_wrappers=[{"name": "SystemPrompt", "kwargs": {"text": "Play.", "tools": False}},
                                      {"name": "WordleShaping", "kwargs": {"per_turn": True}}])
    trainer = GRPOTrainer(config, model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer)
    assert trainer.settings.old_logprobs == "recompute"
    before = {n: p.detach().clone() for n, p in trainer.policy.named_parameters() if "lora_B" in n}
    try:
        trainer.train()
    finally:
        trainer.close()
    allowed = set(guess_texts())
    rows = [json.loads(line) for line in (tmp_path / "grpo" / "trajectories" / "step_000001.jsonl").open()]
    played = [m["content"].removeprefix(PREFIX).removesuffix('"') for r in rows for m in r["messages"]
              if m["role"] == "assistant"]
    assert len(played) >= 4 and all(g in allowed for g in played), played
    metrics = [json.loads(line) for line in (tmp_path / "grpo" / "metrics.jsonl").open()]
    weight = next(m["train/tis_weight_mean"] for m in metrics if "train/tis_weight_mean" in m)
    assert 0.0 < weight < 1.0  # q >= p on every allowed token, < 1 somewhere
    after = {n: p for n, p in trainer.policy.named_parameters() if "lora_B" in n}
    assert any(not torch.equal(before[n], after[n]) for n in before)


@pytest.mark.parametrize("overrides, message", [
    ({"sampler": "openai"}, "needs the 'hf' sampler"),
    ({"serving.stop": []}, "needs a `serving.stop` string"),
    ({"objective.tis_cap": None}, "`objective.tis_cap`"),
    ({"objective.old_logprobs": "sampler"}, "cannot use `objective.old_logprobs: sampler`"),
    ({"serving.constrained": "maybe"}, "must be true or false"),
])
def test_constrained_grpo_settings_are_checked(overrides, message):
    from mtrl_gym.trainers.grpo.config import GRPOConfig

    values = {"serving.constrained": True, "serving.stop": ['"'], **overrides}
    with pytest.raises(ConfigError, match=message):
        GRPOConfig.load(values)


def test_constrained_training_needs_an_env_with_a_vocabulary(tmp_path, chatml_tokenizer):
    pytest.importorskip("peft")
    from tiny_models import build_tiny_llama

    from mtrl_gym.trainers.grpo.config import GRPOConfig
    from mtrl_gym.trainers.grpo.trainer import GRPOTrainer

    config = GRPOConfig(output_dir=str(tmp_path / "grpo"), env="mtrl/SOP-DangerousGoods-v0",
                        serving={"constrained": True, "stop": ["</tool_call>"]}, max_steps=1,
                        tracking={"tracker": "none"}, progress=False, validation={"every": 0})
    with pytest.raises(ConfigError, match="SOP-DangerousGoods-v0 declares no action vocabulary"):
        GRPOTrainer(config, model=build_tiny_llama(len(chatml_tokenizer), seed=0), tokenizer=chatml_tokenizer)
