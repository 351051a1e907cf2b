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
    word = batched["forms"]["word"]
    assert word["anagram_ahead"] == 3 and word["anagram_margin"] > 3
    assert batched["forms"]["spelled"]["tokens"] == 5.0
