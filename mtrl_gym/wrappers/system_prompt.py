"""``SystemPrompt``: replace the system prompt an environment gives its agent.

Evaluate and train with the prompt you will serve with: a short prompt for a small model,
a prompt without tool-call examples it could copy, or none at all. The env's rules do not
change, only ``info["system_prompt"]`` at reset (and, with ``tools=False``, ``info["tools"]``).

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
        text: the new system prompt; ``""`` removes it; ``None`` (with ``tools=False``) keeps
            the env's.
        file: read the prompt from this UTF-8 text file instead of ``text``.
        tools: ``False`` empties ``info["tools"]``, so the system message is exactly the
            prompt: chat renderers append no tool schemas (whose example calls a small model
            copies). The env still accepts its tool calls; use it with a format prefill.
    """

    def __init__(self, env: gymnasium.Env, text: str | None = None, *, file: str | None = None,
                 tools: bool = True):
        if text is not None and file is not None:
            raise ConfigError("SystemPrompt needs exactly one of `text` or `file`, "
                              f"got text={text!r} and file={file!r}")
        if text is None and file is None and tools:
            raise ConfigError("SystemPrompt needs exactly one of `text` or `file` (or tools=False alone, "
                              "which keeps the env's prompt), got text=None and file=None")
        if file is not None:
            try:
                text = Path(file).read_text(encoding="utf-8")
            except OSError as e:
                raise ConfigError(f"cannot read the system prompt file {file!r}: {e.strerror}") from None
        if text is not None and not isinstance(text, str):
            raise ConfigError(f"`text` must be a str, got {type(text).__name__}")
        if not isinstance(tools, bool):
            raise ConfigError(f"`tools` must be true or false, got {tools!r}")
        RecordConstructorArgs.__init__(self, text=text, tools=tools)
        super().__init__(env)
        self.text = text
        self.tools = tools

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        info = dict(info) if self.text is None else {**info, "system_prompt": self.text}
        if not self.tools:
            info["tools"] = []
        return obs, info
