"""``WordleRecap``: end every Wordle observation with one line of the clues, green pattern last.

The env's observation already says everything known (``Known so far: ...``), in lines whose
length varies with the game. A small model that writes its guess letter by letter
(``S H A R D``) keeps a green letter by copying it from the board; that copy is easiest when
the pattern's letters stand at the same distance from the guess's letters every turn, as
they do when the pattern is the observation's last text (the chat template and the format
prefill between them are fixed). This wrapper appends that line::

    Recap: gray C E N; yellow R; green _ _ A _ _

It reads only public facts (``info["guess"]``, ``info["feedback"]``, ``info["valid"]`` and,
at reset, :class:`~mtrl_gym.wrappers.PriorGuesses`'s ``info["prior_guesses"]``), so it sits
above ``PriorGuesses``; the env's rules, rewards and ``info`` do not change, only the text.
The final observation (the game is over) gets no recap. An observation at the space's length
limit (a flood of calls) is cut before the recap, so the line always ends it.

>>> import gymnasium, mtrl_gym
>>> env = WordleRecap(gymnasium.make("mtrl/Wordle-v0"))
>>> _ = env.reset(options={"answer": "shard"})
>>> obs = env.step('<tool_call>{"name": "guess_word", "arguments": {"guess": "crane"}}</tool_call>')[0]
>>> print(obs.splitlines()[-1])
Recap: gray C E N; yellow R; green _ _ A _ _
"""

from __future__ import annotations

from typing import Any

import gymnasium
from gymnasium.utils import RecordConstructorArgs

from mtrl_gym.envs.wordle.game import COLOR_NAMES
from mtrl_gym.envs.wordle.knowledge import Knowledge
from mtrl_gym.error import ConfigError

__all__ = ["WordleRecap", "recap_line"]


def recap_line(known: Knowledge) -> str:
    """The recap of ``known``: gray letters, letters known but not yet placed, then the
    green pattern (``_`` for an unknown position), letters sorted, in capitals."""
    greens = known.greens
    gray = [ch.upper() for ch in sorted(known.max_count) if known.max_count[ch] == 0]
    yellow = [ch.upper() for ch in sorted(known.min_count) if known.min_count[ch] > greens.count(ch)]
    pattern = " ".join([(ch or "_").upper() for ch in greens])
    return f"Recap: gray {' '.join(gray) or '-'}; yellow {' '.join(yellow) or '-'}; green {pattern}"


class WordleRecap(gymnasium.Wrapper, RecordConstructorArgs):
    """Appends :func:`recap_line` to each Wordle observation that asks for a guess.

    Args:
        env: a Wordle env (``mtrl/Wordle-v0`` or ``mtrl/Wordle-Hard-v0``), with any wrappers
            that keep its ``info`` facts (``PriorGuesses`` below this one is read at reset).

    ``WordleRecap(PriorGuesses(gymnasium.make("mtrl/Wordle-v0")))``; in a config,
    ``serving: {wrappers: [WordleRecap]}`` (what the policy reads, saved with the adapter, so
    ``mtrl-gym eval --adapter`` serves it the same way), or ``{"name": "WordleRecap"}`` after
    ``PriorGuesses`` in ``env_wrappers``.
    """

    #: It changes only the text the policy reads (a ``serving.wrappers`` entry may).
    observation_only = True

    def __init__(self, env: gymnasium.Env):
        RecordConstructorArgs.__init__(self)
        gymnasium.Wrapper.__init__(self, env)
        from mtrl_gym.envs.wordle.env import WordleEnv

        if not isinstance(env.unwrapped, WordleEnv):
            raise ConfigError(f"WordleRecap needs a Wordle env, got {env.unwrapped!r}; "
                              'use gymnasium.make("mtrl/Wordle-v0")')
        self._known = Knowledge()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        self._known = Knowledge()
        for prior in info.get("prior_guesses", ()):
            self._known.update(prior["guess"], [COLOR_NAMES.index(c) for c in prior["feedback"]])
        return self._with_recap(obs), info

    def step(self, action: str):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if info.get("valid") and "feedback" in info:
            self._known.update(info["guess"], [COLOR_NAMES.index(c) for c in info["feedback"]])
        if not (terminated or truncated):
            obs = self._with_recap(obs)
        return obs, reward, terminated, truncated, info

    def _with_recap(self, obs: str) -> str:
        line = "\n" + recap_line(self._known)
        limit = getattr(self.observation_space, "max_length", None)
        if limit is not None and len(obs) + len(line) > limit:
            obs = obs[:max(0, limit - len(line))]
        return obs + line
