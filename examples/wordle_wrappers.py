"""Wordle through the whole wrapper stack: curriculum, shaping, format penalty, chat view, recording.

Plays a few games with the built-in solver (plus some noise and some plain-text calls),
prints each episode's shaped reward and its terms, then replays every recorded episode to
check that the env is deterministic. Runs on a CPU in a few seconds::

    python examples/wordle_wrappers.py --episodes 5 --per-turn
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path

import gymnasium
import numpy as np

import mtrl_gym  # noqa: F401  (registers the envs)
from mtrl_gym.envs.wordle.solver import SolverPolicy, format_guess
from mtrl_gym.wrappers import (
    ChatHistory,
    FormatPenalty,
    PriorGuesses,
    RecordEpisodes,
    WordleShaping,
    load_episodes,
    replay_episode,
)


@dataclass
class Args:
    episodes: int = 5
    """Games to play."""
    seed: int = 0
    """Seed of the first reset (later resets continue from it)."""
    per_turn: bool = False
    """Pay shaping increments on every step instead of all on the last step."""
    epsilon: float = 0.3
    """Probability that the player guesses a random word instead of the solver's."""
    loose: float = 0.3
    """Probability that the player writes its guess as plain text instead of a tool call."""
    out: str = ""
    """JSONL file for the records (default: a temporary file)."""


def make_env(args: Args, path: Path) -> gymnasium.Env:
    env = gymnasium.make("mtrl/Wordle-v0")
    env = PriorGuesses(env, num_priors=(0, 2), policy="solver")
    env = WordleShaping(env, per_turn=args.per_turn)
    env = FormatPenalty(env, per_turn=args.per_turn)
    env = ChatHistory(env, max_history=3)
    return RecordEpisodes(env, path)


def main(args: Args) -> None:
    path = Path(args.out or Path(tempfile.mkdtemp()) / "episodes.jsonl")
    rng = np.random.default_rng(args.seed)
    player = SolverPolicy(epsilon=args.epsilon, rng=rng)
    env = make_env(args, path)
    for episode in range(args.episodes):
        messages, info = env.reset(seed=args.seed if episode == 0 else None)
        player.history = [(p["guess"], p["feedback"]) for p in info["prior_guesses"]]  # the priors count
        priors = len(player.history)
        total, done = 0.0, False
        while not done:
            word = player.choose()
            # Sometimes drift into prose: still played (loose match), but penalised.
            action = f"My guess: {word.upper()}" if rng.random() < args.loose else format_guess(word)
            messages, reward, terminated, truncated, info = env.step(action)
            if info["valid"]:
                player.history.append((info["guess"], info["feedback"]))
            total += reward
            done = terminated or truncated
        comp = info["reward_components"]
        print(f"episode {episode}: {'solved' if info['solved'] else 'lost'} in {info['guesses_used']} guesses "
              f"({priors} pre-played), reward {total:+.4f} = outcome "
              f"{comp['outcome']:+.2f} + {comp['weight']} * clip(S={comp['shaping']:+.3f})")
    env.close()
    records = load_episodes(path)
    for record in records:
        replay_episode(record)
    print(f"{len(records)} episodes recorded to {path} and replayed identically")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in vars(Args()).items():
        flag = "--" + name.replace("_", "-")
        if isinstance(default, bool):
            parser.add_argument(flag, action="store_true")
        else:
            parser.add_argument(flag, type=type(default), default=default)
    main(Args(**vars(parser.parse_args())))
