"""Toy environments shared by the trainer tests (imported as ``from toy_envs import ...``;
``tests/`` is on pytest's ``pythonpath``)."""

from __future__ import annotations

import string

import gymnasium
from gymnasium import spaces


class VowelEnv(gymnasium.Env[str, str]):
    """Reward: the fraction of the task's ``letters`` (default: vowels) among the letters of each
    reply; ``turns`` replies per episode."""

    reward_range = (-1.0, 1.0)

    def __init__(self):
        # printable: the alphanumeric default does not hold "Say something." (the kit caught it)
        self.observation_space = spaces.Text(100_000, min_length=0, charset=string.printable)
        self.action_space = spaces.Text(100_000, min_length=0)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.task, self.t = dict((options or {}).get("task") or {}), 0
        return "Say something.", {"system_prompt": "Be brief.", "tools": [], "task_id": self.task.get("id", "x")}

    def step(self, action):
        self.t += 1
        letters = [c for c in action.lower() if c.isalpha()]
        scored = self.task.get("letters", "aeiou")
        reward = sum(c in scored for c in letters) / len(letters) if letters else 0.0
        done = self.t >= self.task.get("turns", 1)
        info = {"tool_calls": [], "tool_results": [], "format_error": False, "success": reward > 0.5}
        return "ok", reward, done, False, info


class HoldEnv(VowelEnv):
    """:class:`VowelEnv` whose first step waits while a task row's ``hold`` folder has no ``release``
    file, after writing ``pid-<process id>`` there: a test can see which process is mid-episode,
    kill it, and then let the others go on."""

    def step(self, action):
        hold = self.task.get("hold")
        if hold and self.t == 0:
            import os
            import time
            from pathlib import Path

            folder = Path(hold)
            if not (folder / "release").exists():
                (folder / f"pid-{os.getpid()}").write_text(str(os.getpid()))
                deadline = time.monotonic() + 120
                while not (folder / "release").exists() and time.monotonic() < deadline:
                    time.sleep(0.02)
        return super().step(action)
