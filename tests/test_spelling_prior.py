"""examples/wordle_spelling_prior.py: the non-words it scores, its refusals, and a real run."""

from __future__ import annotations

import json
import random

import pytest

from mtrl_gym.envs.wordle import game


def test_the_non_words_are_an_anagram_and_a_one_letter_change_outside_the_allowed_guesses(spelling_prior):
    allowed = game.allowed_index()
    rng = random.Random(3)
    for word in ("crate", "shard", "mamma", "fuzzy", "queen"):
        anagram, change = spelling_prior.non_words(word, rng)
        assert sorted(anagram) == sorted(word) and anagram != word and anagram not in allowed
        assert sum(a != b for a, b in zip(change, word)) == 1 and change not in allowed
    assert spelling_prior.non_words("crate", random.Random(0)) == spelling_prior.non_words("crate", random.Random(0))


def test_the_forms_compared_include_the_two_the_env_reads(spelling_prior):
    forms = {name: form("crate") for name, form in spelling_prior.FORMS.items()}
    assert forms["word"] == "crate" and forms["spelled"] == game.spell("crate") == "C R A T E"
    assert {game.unspell(forms[k]) for k in ("spelled", "lower", "hyphens", "HYPHENS")} == {"crate"}


@pytest.mark.parametrize("argv", [["--words", "0"], ["--words", "641"], ["--split", "val", "--words", "129"],
                                  ["--batch", "0"]])
def test_bad_counts_are_refused(spelling_prior, argv):
    with pytest.raises(SystemExit):
        spelling_prior.parse_args(argv)


@pytest.mark.parametrize("argv", [["--words", "640"], ["--split", "val", "--words", "128"], ["--words", "1"]])
def test_the_whole_split_is_accepted(spelling_prior, argv):
    assert spelling_prior.parse_args(argv).words == int(argv[-1])


def test_a_reply_scores_what_the_model_s_own_loss_says(spelling_prior):
    """Each reply's summed log-probability in a right-padded batch, end-of-turn token included, equals
    minus the model's own cross-entropy loss over those tokens times their number."""
    pytest.importorskip("torch")
    import torch

    from mtrl_gym import models

    torch.set_num_threads(1)
    model, tokenizer = models.load("smollm2-135m", dtype=torch.float32)
    prefix = tokenizer(tokenizer.apply_chat_template([{"role": "user", "content": spelling_prior.QUESTION}],
                                                     tokenize=False, add_generation_prompt=True),
                       add_special_tokens=False).input_ids
    end = tokenizer(spelling_prior.END_OF_TURN, add_special_tokens=False).input_ids
    replies = ["C R A T E", "crate", "c-r-a-t-e"]
    scored = spelling_prior.reply_logprobs(model, tokenizer, prefix, replies, 3, end)
    for reply, (logprob, n) in zip(replies, scored):
        ids = prefix + tokenizer(reply, add_special_tokens=False).input_ids + end
        labels = [-100] * len(prefix) + ids[len(prefix):]
        with torch.no_grad():
            loss = model(input_ids=torch.tensor([ids]), labels=torch.tensor([labels])).loss.item()
        assert n == len(ids) - len(prefix) - len(end)
        assert logprob == pytest.approx(-loss * (n + len(end)), abs=1e-3)


def test_a_real_run_of_the_base_model_is_the_same_in_batches_and_alone(spelling_prior, tmp_path):
    """The embedded SmolLM2 scores three words; right-padded batches give each reply's log-probability
    as scoring it alone does, and the word written as a word is ahead of its anagram."""
    pytest.importorskip("torch")
    import torch

    torch.set_num_threads(1)
    alone = spelling_prior.main(["--words", "3", "--batch", "1"])
    batched = spelling_prior.main(["--words", "3", "--batch", "7", "--out", str(tmp_path / "prior.json")])
    assert json.loads((tmp_path / "prior.json").read_text()) == batched
    assert set(batched["forms"]) == set(spelling_prior.FORMS)
    for name, r in batched["forms"].items():
        for key, value in r.items():
            assert value == pytest.approx(alone["forms"][name][key], abs=1e-3), (name, key)
        assert r["anagram_margin"] == pytest.approx(sum(r["anagram_margins"]) / 3)
    word = batched["forms"]["word"]
    assert word["anagram_ahead"] == 3 and word["anagram_margin"] > 3
    assert batched["forms"]["spelled"]["word_tokens"] == 5.0 and len(batched["triples"]) == 3
