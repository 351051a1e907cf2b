"""Wrappers: each one concern, composable, reading only public ``info`` facts.

* :class:`BoundedShaping`, :class:`WordleShaping`: ``outcome + w * clip(shaping, -1, 1)``,
  bounded so that no shaping reorders the outcome tiers.
* :class:`FormatPenalty`: a bounded penalty for format errors and plain-text tool calls.
* :class:`FieldReward`: SOP tasks' dense reward, the share of the final answer's fields that are right.
* :class:`ChatHistory`: the observation as the whole conversation (chat messages).
* :class:`PriorGuesses`: a Wordle curriculum that starts games with guesses played.
* :class:`WordleRecap`: end each Wordle observation with a one-line recap, green pattern last.
* :class:`SystemPrompt`: replace the env's system prompt (train and serve with the same one).
* :class:`RecordEpisodes`, :func:`replay_episode`: JSONL episode records and determinism checks.
* :class:`EpisodeStats`: the episode's outcome reward and per-turn play rates (valid guesses...) in ``info``.

A typical stack, innermost first::

    env = gymnasium.make("mtrl/Wordle-v0")
    env = PriorGuesses(env, num_priors=(0, 4))
    env = WordleShaping(env, per_turn=True)
    env = FormatPenalty(env)
    env = RecordEpisodes(env, "episodes.jsonl")

See docs/wrappers.md for the shaping weights and the tier guarantees.
"""

from mtrl_gym.wrappers.chat import ChatHistory, ChatText, message_space, to_openai
from mtrl_gym.wrappers.curriculum import PriorGuesses, safe_prior_words
from mtrl_gym.wrappers.episode_stats import EpisodeStats, turn_facts_of
from mtrl_gym.wrappers.field_reward import FieldReward, field_metrics
from mtrl_gym.wrappers.format_penalty import FormatPenalty
from mtrl_gym.wrappers.recording import RecordEpisodes, iter_episodes, load_episodes, replay_episode
from mtrl_gym.wrappers.shaping import BoundedShaping, tier_limits
from mtrl_gym.wrappers.system_prompt import SystemPrompt
from mtrl_gym.wrappers.wordle_recap import WordleRecap, recap_line
from mtrl_gym.wrappers.wordle_shaping import WORDLE_SCALE, WORDLE_WEIGHTS, WordleShaping, wordle_step_terms

__all__ = [
    "BoundedShaping", "tier_limits",
    "WordleShaping", "WORDLE_WEIGHTS", "WORDLE_SCALE", "wordle_step_terms",
    "FormatPenalty",
    "FieldReward", "field_metrics",
    "ChatHistory", "ChatText", "message_space", "to_openai",
    "PriorGuesses", "safe_prior_words",
    "SystemPrompt",
    "WordleRecap", "recap_line",
    "RecordEpisodes", "replay_episode", "load_episodes", "iter_episodes",
    "EpisodeStats", "turn_facts_of",
]
