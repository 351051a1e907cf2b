"""Constrained decoding: a turn's completion must be one of a fixed list of texts.

:class:`CompletionConstraint` holds the token ids of every allowed completion in a prefix
tree. A sampler that supports it (the transformers sampler) masks, at every decoding step,
all tokens that do not continue one of the allowed completions, samples from the
renormalised distribution over the rest, and ends the turn when a completion is whole.

Its use here is a *policy of its own* for envs with a closed action vocabulary: Wordle
played with the format prefill ``... {"guess": "`` and the stop string ``"`` can be
restricted to ``word + '"'`` for every allowed guess, so the model can only pick among
dictionary words (it still has to pick a good one: repeats, clue-inconsistent words and
losses are all still possible). Reports must name it as such ("dictionary decoding"),
never mix it with the plain model's figures.

Conventions:

* the allowed texts are tokenised as whole strings (``tokenizer.encode(text)`` without
  special tokens), the way the rollout engine tokenises a scripted action: the model may
  only produce that one segmentation of each text;
* the log-prob a sampler reports for a constrained token is under the *masked,
  renormalised* distribution the token was drawn from (what the constrained policy did);
* no allowed completion may be a strict prefix of another (a turn ends as soon as the
  generated ids spell one); :meth:`CompletionConstraint.from_texts` rejects such lists.

>>> c = CompletionConstraint([[5, 6], [5, 7, 8], [9]])
>>> sorted(c.allowed_next([]))
[5, 9]
>>> sorted(c.allowed_next([5]))
[6, 7]
>>> c.is_complete([5, 7, 8]), c.is_complete([5, 7])
(True, False)
>>> c.allowed_next([4]) is None
True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from mtrl_gym.error import ConfigError

__all__ = ["CompletionConstraint", "action_vocabulary", "vocabulary_constraint"]

_END = -1  # key of the "a completion ends here" marker in a trie node


class CompletionConstraint:
    """A prefix tree over the token ids of the allowed completions.

    Args:
        completions: token-id sequences (each non-empty); duplicates are merged.
        name: what the constraint is, for reports (e.g. ``"dictionary"``).
    """

    def __init__(self, completions: Iterable[Sequence[int]], *, name: str = "constrained"):
        self.name = str(name)
        self._root: dict[int, Any] = {}
        count = 0
        for ids in completions:
            ids = [int(t) for t in ids]
            if not ids:
                raise ConfigError("an allowed completion has no tokens; every allowed text must be non-empty")
            node = self._root
            for t in ids:
                if _END in node:
                    raise ConfigError(f"allowed completion {ids!r} extends a shorter allowed completion; "
                                      "none may be a prefix of another (end each with the same stop string)")
                node = node.setdefault(t, {})
            if len(node) > (1 if _END in node else 0):
                raise ConfigError(f"allowed completion {ids!r} is a prefix of a longer one; none may be a "
                                  "prefix of another (end each with the same stop string)")
            if _END not in node:
                node[_END] = True
                count += 1
        if not count:
            raise ConfigError("a completion constraint needs at least one allowed completion")
        self.size = count
        """How many distinct completions are allowed."""

    @classmethod
    def from_texts(cls, texts: Iterable[str], tokenizer: Any, *, name: str = "constrained",
                   max_tokens: int | None = None) -> CompletionConstraint:
        """The constraint for ``texts``, each tokenised whole (no special tokens).

        ``max_tokens``: keep only the texts of at most that many tokens (a turn's token
        budget: a longer completion could never be finished); ConfigError when none fits.
        """
        encoded = (tokenizer.encode(t, add_special_tokens=False) for t in texts)
        if max_tokens is None:
            return cls(encoded, name=name)
        kept = [ids for ids in encoded if len(ids) <= max_tokens]
        if not kept:
            raise ConfigError(f"no allowed completion of {name!r} fits in {max_tokens} tokens; raise max_new_tokens")
        return cls(kept, name=name)

    def _node(self, generated: Sequence[int]) -> dict[int, Any] | None:
        node = self._root
        for t in generated:
            node = node.get(int(t))
            if node is None:
                return None
        return node

    def allowed_next(self, generated: Sequence[int]) -> list[int] | None:
        """Token ids that may follow ``generated`` (the turn's ids so far); ``None`` when
        ``generated`` is not a prefix of any allowed completion or is already whole."""
        node = self._node(generated)
        if node is None or _END in node:
            return None
        return [t for t in node if t != _END]

    def is_complete(self, generated: Sequence[int]) -> bool:
        """True when ``generated`` spells one allowed completion exactly."""
        node = self._node(generated)
        return node is not None and _END in node

    def __repr__(self) -> str:
        return f"CompletionConstraint({self.name!r}, {self.size} completions)"


def action_vocabulary(env: Any, *, what: str = "this env"):
    """The ``action_vocabulary`` function of ``env``'s profile (an id, class or instance);
    ConfigError when the env has none (``what`` names the run or env in the message)."""
    from mtrl_gym.envs.profile import profile_of

    vocabulary = profile_of(env).action_vocabulary
    if vocabulary is None:
        raise ConfigError(f"{what} declares no action vocabulary (EnvProfile.action_vocabulary), "
                          "so it cannot be played with constrained decoding")
    return vocabulary


def vocabulary_constraint(env: Any, tokenizer: Any, stop: str, *, max_tokens: int | None = None,
                          what: str = "this env") -> CompletionConstraint:
    """The dictionary-decoding constraint of ``env``: every text of its action vocabulary
    (:func:`action_vocabulary`) followed by ``stop``, those of at most ``max_tokens`` tokens."""
    texts = (w + stop for w in action_vocabulary(env, what=what)())
    return CompletionConstraint.from_texts(texts, tokenizer, name="vocabulary", max_tokens=max_tokens)
