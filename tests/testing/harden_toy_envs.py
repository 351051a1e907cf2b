"""Deliberately broken toy text envs, one per property the check kit must catch."""

from __future__ import annotations

import gymnasium
from gymnasium import spaces

CHARSET = "".join(chr(i) for i in range(32, 127)) + "\n"


class Toy(gymnasium.Env):
    """A correct one-secret text env: say the word."""

    def __init__(self):
        self.observation_space = spaces.Text(2000, min_length=0, charset=CHARSET)
        self.action_space = spaces.Text(100_000, min_length=0)
        self.secret = ""

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.secret = ["alpha", "bravo", "charlie"][int(self.np_random.integers(3))] + "-word"
        return "Guess the word.", {"task_id": "t"}

    def info(self, action: str) -> dict:
        return {"length": len(action)}

    def obs(self, action: str) -> str:
        return "right" if action.strip() == self.secret else "wrong"

    def step(self, action):
        done = action.strip() == self.secret
        return self.obs(action), float(done), done, False, self.info(action)


class Leaky(Toy):
    def info(self, action):
        return {"debug": {"expected": [self.secret]}}


class HashOrder(Toy):
    def obs(self, action):
        return ",".join(sorted(set("abcdefghijklmnopqrstuvwxyz"), key=hash))


class SurrogateCrash(Toy):
    def step(self, action):
        action.encode("utf-8")
        return super().step(action)


class NonJSONInfo(Toy):
    def info(self, action):
        return {"payload": object()}


class Quadratic(Toy):
    def obs(self, action):
        n = min(len(action), 20_000)
        count = sum(action.count("<", i, n) for i in range(0, n, 2))
        return f"{count % 7} wrong"


class DebugHint(Toy):
    """The issue's probe: the answer sits in ``info["debug_hint"]``."""

    def info(self, action):
        return {"debug_hint": self.secret}


class ProfiledLeaky(DebugHint):
    """:class:`DebugHint` that names its secret in its env profile (no ``--secret`` needed)."""

    @classmethod
    def profile(cls):
        from mtrl_gym.envs.profile import EnvProfile

        return EnvProfile(secret=secret)


class HashSecret(Toy):
    """Every observation and reward is deterministic, but the hidden word is drawn in set (hash) order."""

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        words = list({f"{name}-word" for name in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
                                                  "hotel", "india", "juliett", "kilo", "lima", "mike", "november",
                                                  "oscar", "papa", "quebec", "romeo", "sierra", "tango")})
        self.secret = words[int(self.np_random.integers(len(words)))]
        return obs, info


class LongRaise(Toy):
    """Declares actions up to 50,000 characters but raises on any above 40,000."""

    def __init__(self):
        super().__init__()
        self.action_space = spaces.Text(50_000, min_length=0)

    def step(self, action):
        if len(action) > 40_000:
            raise ValueError("action too long")
        return super().step(action)


def secret(env) -> str:
    """The toys' secret extractor, by dotted path: ``harden_toy_envs:secret``."""
    return env.unwrapped.secret


for cls in (Toy, Leaky, HashOrder, SurrogateCrash, NonJSONInfo, Quadratic, DebugHint, ProfiledLeaky, HashSecret,
            LongRaise):
    if f"harden_toys/{cls.__name__}-v0" not in gymnasium.registry:
        gymnasium.register(f"harden_toys/{cls.__name__}-v0", entry_point=f"{__name__}:{cls.__name__}",
                           disable_env_checker=True)
