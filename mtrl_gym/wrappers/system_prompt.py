"""``SystemPrompt``: replace the system prompt an environment gives its agent.

Evaluate and train with the prompt you will serve with: a short prompt for a small model,
a prompt without tool-call examples it could copy, or none at all. The env's rules do not
change, only ``info["system_prompt"]`` at reset.

>>> import gymnasium, mtrl_gym
>>> env = SystemPrompt(gymnasium.make("mtrl/Wordle-v0"), "Guess the 5-letter word.")
>>> env.reset(seed=0)[1]["system_prompt"]
'Guess the 5-letter word.'
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium
from gymnasium.utils import RecordConstructorArgs

from mtrl_gym.error import ConfigError

__all__ = ["SystemPrompt"]


class SystemPrompt(gymnasium.Wrapper, RecordConstructorArgs):
    """Replaces ``info["system_prompt"]`` at reset.

    Args:
        env: the environment.
        text: the new system prompt; ``""`` removes it.
        file: read the prompt from this UTF-8 text file instead of ``text``.
    """

    def __init__(self, env: gymnasium.Env, text: str | None = None, *, file: str | None = None):
        if (text is None) == (file is None):
            raise ConfigError("SystemPrompt needs exactly one of `text` or `file`, "
                              f"got text={text!r} and file={file!r}")
        if file is not None:
            try:
                text = Path(file).read_text(encoding="utf-8")
            except OSError as e:
                raise ConfigError(f"cannot read the system prompt file {file!r}: {e.strerror}") from None
        if not isinstance(text, str):
            raise ConfigError(f"`text` must be a str, got {type(text).__name__}")
        RecordConstructorArgs.__init__(self, text=text)
        super().__init__(env)
        self.text = text

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, {**info, "system_prompt": self.text}
