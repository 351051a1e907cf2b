"""A sampler that answers from a script (no model): the multi-agent tests' seats."""

from __future__ import annotations

import numpy as np

from mtrl_gym.rollout.samplers.base import SampleResult, Sampler


def guess(word: str) -> str:
    return '<tool_call>{"name": "guess_word", "arguments": {"guess": "' + word + '"}}</tool_call>'


class ScriptedSampler(Sampler):
    """Answers each request with a text chosen by ``choose(request)``, as tokens with made-up log-probs."""

    name = "scripted"

    def __init__(self, tokenizer, choose):
        self.tokenizer, self.choose = tokenizer, choose
        self.eos_token_ids = [tokenizer.eos_token_id]
        self.requests = []

    def sample(self, requests):
        self.requests.extend(requests)
        out = []
        for r in requests:
            ids = self.tokenizer.encode(self.choose(r), add_special_tokens=False)[:r.params.max_new_tokens - 1]
            ids.append(self.tokenizer.eos_token_id)
            out.append(SampleResult(ids, [-1.0] * len(ids), "stop", prompt_tokens=len(r.prompt_ids)))
        return out


def random_guesses(request) -> str:
    """A seeded pick of three words: games end in wins, losses and draws."""
    return guess(["paste", "crane", "slate"][int(np.random.default_rng(request.params.seed).integers(3))])
