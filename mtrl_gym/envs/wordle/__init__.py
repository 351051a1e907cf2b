"""Wordle: game logic, the environment, prompts and a built-in solver.

>>> import gymnasium, mtrl_gym
>>> env = gymnasium.make("mtrl/Wordle-v0")
>>> obs, info = env.reset(seed=0)
>>> sorted(info)[:3]
['candidates_remaining', 'guesses_used', 'system_prompt']
"""

from mtrl_gym.envs.wordle.env import (
    LOSS_REWARD,
    MAX_REWARD,
    MIN_REWARD,
    SUCCESS_THRESHOLD,
    WordleEnv,
    solve_reward,
)

__all__ = ["WordleEnv", "SUCCESS_THRESHOLD", "MIN_REWARD", "MAX_REWARD", "LOSS_REWARD", "solve_reward"]
