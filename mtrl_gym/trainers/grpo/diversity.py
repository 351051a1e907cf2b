"""Collapse guards: penalties for actions repeated across a group or dominating a batch.

A small policy trained by GRPO can collapse onto one action (a Wordle model playing the
word from its own system prompt six times a game): once every rollout of a group plays
the same word, the group's rewards are equal, its advantages zero, and nothing pushes the
policy off it. These guards act where the whole group and batch are visible, on the
rewards *before* the advantage estimator (outcome-based exploration in the spirit of
Song, Kempe & Munos 2025: rarer outcomes earn relatively more):

* **group repeat** (``coef_group``): episode ``i`` of a group of ``G`` with actions
  ``a_1..a_T`` (one per turn) pays ``coef_group * mean_t n(a_t) / (G - 1)``, where
  ``n(a)`` is the number of *other* episodes of the group that played ``a`` at any turn.
  An episode whose actions no other rollout played pays 0; a group that all plays the same
  single action pays ``coef_group`` each (a constant shift: such a group still has zero
  variance, and the batch term below is what reaches it).
* **batch dominance** (``coef_batch``, ``threshold``): with ``s(a)`` the share of all the
  batch's actions equal to ``a``, episode ``i`` pays
  ``coef_batch * mean_t max(0, s(a_t) - threshold) / (1 - threshold)``: nothing while no
  action exceeds ``threshold`` of the batch, up to ``coef_batch`` for an action that is all
  of it. Episodes of a collapsed group differ in how many turns play the dominant word, so
  the penalty separates them.

Actions are compared as the assistant's text, stripped and lower-cased
(:func:`trajectory_actions`). :func:`diversity_metrics` reports, per step, the distinct
actions per group, the most common action and its share of the batch, and the mean
negative log-probability of the sampled tokens (a Monte-Carlo estimate of the policy's
token entropy, free from the sampler's log-probs).

>>> diversity_penalties([["a"], ["a"], ["b"], ["c"]], group_size=4, coef_group=0.3)
[0.1, 0.1, 0.0, 0.0]
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from mtrl_gym.error import ConfigError
from mtrl_gym.rollout.trajectory import Trajectory

__all__ = ["trajectory_actions", "diversity_penalties", "diversity_metrics", "top_action", "shown_action"]


def trajectory_actions(t: Trajectory) -> list[str]:
    """The assistant turns' text of an episode, stripped and lower-cased."""
    return [str(m.get("content") or "").strip().lower() for m in t.messages if m.get("role") == "assistant"]


def diversity_penalties(actions: Sequence[Sequence[str]], group_size: int, *, coef_group: float = 0.0,
                        coef_batch: float = 0.0, threshold: float = 0.3) -> list[float]:
    """Per episode, the penalty to subtract from its reward (see the module docstring).

    ``actions[i]`` are episode ``i``'s actions; groups of ``group_size`` are contiguous.
    Episodes without actions pay 0.
    """
    if coef_group < 0 or coef_batch < 0:
        raise ConfigError(f"diversity coefficients must be >= 0, got {coef_group!r} and {coef_batch!r}")
    if not 0.0 <= threshold < 1.0:
        raise ConfigError(f"the dominance threshold must be in [0, 1), got {threshold!r}")
    if group_size < 1 or len(actions) % group_size:
        raise ConfigError(f"{len(actions)} episodes do not split into groups of {group_size}")
    out = [0.0] * len(actions)
    share: Counter[str] = Counter(a for acts in actions for a in acts)
    total = sum(share.values())
    for g in range(0, len(actions), group_size):
        group = [set(acts) for acts in actions[g:g + group_size]]
        for j, acts in enumerate(actions[g:g + group_size]):
            if not acts:
                continue
            penalty = 0.0
            if coef_group and group_size > 1:
                others = [s for k, s in enumerate(group) if k != j]
                penalty += coef_group * sum(sum(a in s for s in others) for a in acts) / len(acts) / (group_size - 1)
            if coef_batch and total:
                over = [max(0.0, share[a] / total - threshold) / (1.0 - threshold) for a in acts]
                penalty += coef_batch * sum(over) / len(acts)
            out[g + j] = round(penalty, 12)
    return out


def top_action(actions: Sequence[Sequence[str]]) -> tuple[str, float]:
    """The most common action of a batch and its share of all actions (``("", 0.0)`` if none)."""
    counts = Counter(a for acts in actions for a in acts)
    if not counts:
        return "", 0.0
    action, n = counts.most_common(1)[0]
    return action, n / sum(counts.values())


def shown_action(action: str, prefix: str = "", width: int = 48) -> str:
    """``action`` as the collapse warning prints it: without the serving's format prefill
    ``prefix`` (every action of a prefilled run starts with it, lower-cased like the action),
    and, if still longer than ``width`` characters, its last ones after ``...``.

    >>> shown_action('<tool_call>{"name": "guess_word", "arguments": {"guess": "c l o n e"',
    ...              '<tool_call>{"name": "guess_word", "arguments": {"guess": "')
    'c l o n e"'
    >>> shown_action("x" * 60, width=10)
    '...xxxxxxx'
    """
    start = prefix.strip().lower()
    if start and action.startswith(start):
        action = action[len(start):]
    return action if len(action) <= width else "..." + action[len(action) - (width - 3):]


def diversity_metrics(trajectories: Sequence[Trajectory], group_size: int) -> dict[str, float]:
    """``distinct_actions_per_group`` (mean), ``top_action_share``, ``sampled_token_nll``."""
    actions = [trajectory_actions(t) for t in trajectories]
    groups = [actions[g:g + group_size] for g in range(0, len(actions), group_size)]
    distinct = [len({a for acts in grp for a in acts}) for grp in groups]
    nll = [-lp for t in trajectories for lp, m in zip(t.logprobs, t.loss_mask) if m]
    return {"distinct_actions_per_group": sum(distinct) / max(len(distinct), 1),
            "top_action_share": top_action(actions)[1],
            "sampled_token_nll": sum(nll) / len(nll) if nll else 0.0}
