"""Rollouts of multi-agent envs: self-play, reference opponents and frozen checkpoints, one trajectory per seat.

:class:`MultiAgentRolloutEngine` plays ``len(tasks) * group_size`` games of a multi-agent
env (``mtrl/WordleDuel-v0``, ``mtrl/SOP-CustomerCall-v0``, through PettingZoo's Parallel
API) and is a :class:`~mtrl_gym.rollout.engine.RolloutEngine`: each seat played by a
model is an episode of the single-agent engine, with its own token context, loss mask,
log-probs, turn rewards and chat messages, rendered, sampled, budgeted and failed by the
same code. What is new here is only the game loop around the seats:

* **Seats.** ``seats`` maps each seat to ``"self"`` (the sampler being trained: *self-play*
  when every seat is ``"self"``, the default), a reference policy name of the env
  (``"solver"``, ``"random"``, ``"scripted"``; see :mod:`mtrl_gym.envs.multiagent.policies`),
  a text policy object, or another :class:`~mtrl_gym.rollout.samplers.base.Sampler` (a
  frozen checkpoint, with the same tokenizer). Only ``"self"`` seats return trajectories.
* **Cycles.** In each cycle every acting seat of every live game is asked at once (one
  sampler call per sampler); a *waiting* seat (``info["waiting"]``) is not asked and plays
  nothing. A seat's env reply is what it observes the next time it acts (or at the end of
  the game), with the rewards it earned in between.
* **Order and groups.** Game ``k`` of task ``g`` resets with ``seed + g``; trajectories come
  back in (task, seat, sample) order with ``group_id = g * len(trained seats) + seat index``,
  so GRPO's contiguous groups of ``group_size`` are exactly the episodes of one seat on one
  task. Sampling seeds derive from that group id, so two seats never share a seed.
* **Metrics.** Each trajectory also carries ``seat/<seat>/reward`` and, in games with an
  ``outcome``, ``seat/<seat>/win``, ``.../draw``, ``.../loss``: the trainer's batch means
  (``rollout/seat/player_0/win``, ...) show each seat's record.
* **Failures.** A seat whose episode ends early (sampler error, token or time budget,
  ``max_turns``) plays empty text for the rest of its game; the others play on.

>>> from mtrl_gym.rollout.sources.multiagent import MultiAgentRolloutEngine  # doctest: +SKIP
>>> engine = MultiAgentRolloutEngine("mtrl/WordleDuel-v0", sampler, tokenizer, group_size=4,
...                                  seats={"player_1": "solver"})            # doctest: +SKIP
>>> trajectories = engine.collect([{"answer": "paste", "id": "t0"}])          # doctest: +SKIP
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mtrl_gym.error import ConfigError
from mtrl_gym.rollout.engine import EpisodeState, RolloutConfig, RolloutEngine, failure_text
from mtrl_gym.rollout.envs import EnvSource
from mtrl_gym.rollout.samplers.base import Sampler
from mtrl_gym.rollout.trajectory import Trajectory

__all__ = ["MultiAgentRolloutEngine", "SelfPlayOptions", "collect_multiagent", "make_selfplay_engine", "SELF",
           "refuse_serving_wrappers"]

#: The seat value that means "played by the sampler being trained".
SELF = "self"


@dataclass
class SelfPlayOptions:
    """Options of the ``selfplay`` source (``source: {name: selfplay, seats: {...}}``), for multi-agent envs."""

    seats: dict[str, str] = field(default_factory=dict)
    """Who plays each seat, ``"self"`` (the policy being trained) or a reference policy of
    the env (``{"player_1": "solver"}``); seats not named are ``"self"`` (self-play). Each
    trained seat of each task is its own GRPO group."""

    def __post_init__(self) -> None:
        if not isinstance(self.seats, dict) or not all(isinstance(k, str) and isinstance(v, str) and v
                                                        for k, v in self.seats.items()):
            raise ConfigError(f'`source.seats` must map seat names to "self" or a policy name, got {self.seats!r}')


@dataclass
class _Seat:
    """One seat of one game: a model episode (``ep``) or a text policy, and what it is owed."""

    name: str
    ep: EpisodeState | None = None
    sampler: Sampler | None = None
    policy: Any = None
    reset_info: dict[str, Any] = field(default_factory=dict)
    opened: bool = False
    awaiting: bool = False
    reward: float = 0.0


@dataclass
class _Game:
    env: Any
    seats: dict[str, _Seat]
    obs: dict[str, Any]
    infos: dict[str, Any]
    over: bool = False


class MultiAgentRolloutEngine(RolloutEngine):
    """Plays batches of multi-agent games with one trained sampler; see the module docstring.

    Args:
        env: a multi-agent id (``"mtrl/WordleDuel-v0"``) or a callable returning a new
            PettingZoo Parallel env of :mod:`mtrl_gym.envs.multiagent`.
        sampler, tokenizer, config, overrides: as :class:`~mtrl_gym.rollout.engine.RolloutEngine`
            (``config.env_kwargs`` go to the env).
        seats: seat -> ``"self"``, a reference policy name, a policy object or a Sampler;
            seats not named are ``"self"``.
    """

    def __init__(self, env: EnvSource, sampler: Sampler, tokenizer, config: RolloutConfig | None = None, *,
                 seats: Mapping[str, Any] | None = None, wrappers: Sequence[Callable] = (), **overrides: Any):
        if wrappers:
            raise ConfigError("env wrappers are gymnasium wrappers and do not apply to a multi-agent env; leave "
                              "`env_wrappers` empty for it")
        super().__init__(env, sampler, tokenizer, config, **overrides)
        probe = self._idle_envs[-1]
        unknown = sorted(set(seats or {}) - set(probe.possible_agents))
        if unknown:
            raise ConfigError(f"unknown seat(s) {unknown} for {self.env_id}; its seats are {probe.possible_agents}")
        self.seats = {s: (seats or {}).get(s, SELF) for s in probe.possible_agents}
        for seat, player in self.seats.items():
            if isinstance(player, str) and player != SELF:
                _policy(probe, seat, player)  # an unknown name fails here, not in the first game
        self.trained_seats = [s for s, p in self.seats.items() if p == SELF]
        if not self.trained_seats:
            raise ConfigError(f"no seat of {self.env_id} is played by the trained sampler: give at least one seat "
                              f"the value {SELF!r} (seats: {dict(self.seats)})")

    # ------------------------------------------------------------------ setup (engine hooks)

    def _make_env(self):
        if isinstance(self.env_source, str):
            from mtrl_gym.registry import make_multiagent

            return make_multiagent(self.env_source, parallel=True, **self.config.env_kwargs)
        return self.env_source()

    def _failure_reward(self, env) -> float:
        if self.config.failure_reward is not None:
            return float(self.config.failure_reward)
        return float(env.unwrapped.game.reward_range[0])

    # ------------------------------------------------------------------ main loop

    def collect(self, tasks: Sequence[Mapping[str, Any] | None], *, seed: int | None = None,
                on_episode: Callable[[Trajectory], None] | None = None) -> list[Trajectory]:
        """Play ``group_size`` games of every task; the trained seats' trajectories in (task, seat, sample) order."""
        base = self._base_seed(seed)
        run = uuid.uuid4().hex[:12]
        games = [self._start_game(task, g, k, base, run) for g, task in enumerate(tasks)
                 for k in range(self.config.group_size)]
        released: set[int] = set()

        def release(final: bool = False) -> None:
            for game in games:
                for seat in game.seats.values():
                    ep = seat.ep
                    if ep is not None and id(ep) not in released and (ep.done or final):
                        released.add(id(ep))
                        self._release_seat(seat)
                        if on_episode is not None and seat.sampler is self.sampler:
                            on_episode(ep.traj)

        try:
            while live := [g for g in games if not g.over]:
                self._play_cycle(live, base)
                release()
        finally:
            release(final=True)
        trained = [(game, seat) for game in games for seat in game.seats.values()
                   if seat.ep is not None and seat.sampler is self.sampler]
        trained.sort(key=lambda gs: (gs[1].ep.traj.group_id, gs[1].ep.traj.sample_index))
        return [seat.ep.traj for _, seat in trained]

    def _start_game(self, task, g: int, k: int, base: int, run: str) -> _Game:
        env = self._idle_envs.pop() if self._idle_envs else self._make_env()
        options = {"task": dict(task)} if task is not None else None
        row_id = str(task.get("id", "")) if isinstance(task, Mapping) else ""
        seats: dict[str, _Seat] = {}
        for i, (name, player) in enumerate(self.seats.items()):
            seat = _Seat(name)
            if player == SELF or _is_sampler(player):
                seat.sampler = self.sampler if player == SELF else player
                group = g * len(self.trained_seats) + self.trained_seats.index(name) if player == SELF else \
                    g * len(self.seats) + i
                traj = Trajectory(task_id=row_id, env_id=self.env_id, group_id=group, sample_index=k, seed=base + g)
                seat.ep = EpisodeState(env=None, traj=traj, session=f"{run}-{g}-{k}-{name}", start=time.monotonic())
            else:
                seat.policy = player if not isinstance(player, str) else _policy(env, name, player)
            seats[name] = seat
        game = _Game(env, seats, {}, {})
        try:
            game.obs, game.infos = env.reset(seed=base + g, options=options)
        except Exception as e:  # noqa: BLE001 - a broken reset fails the game's episodes, not the run
            for seat in seats.values():
                if seat.ep is not None:
                    self._fail(seat.ep, failure_text("env reset", e))
            game.over = True
            return game
        for i, seat in enumerate(seats.values()):
            seat.reset_info = dict(game.infos[seat.name])
            if seat.ep is not None:
                seat.ep.traj.task_id = str(seat.reset_info.get("task_id") or row_id)
                seat.ep.traj.final_info = {"seat": seat.name}
            if seat.policy is not None:
                seat.policy.reset(seat.reset_info, np.random.default_rng([base, g, k, i]), seed=base + g, task=task)
            self._open_if_acting(game, seat, row_id)
        return game

    def _open_if_acting(self, game: _Game, seat: _Seat, row_id: str = "") -> None:
        """Render a model seat's first prompt the first time it acts (a seat may start out waiting)."""
        if seat.ep is None or seat.opened or seat.ep.done or game.infos[seat.name].get("waiting"):
            return
        seat.opened = True
        info = {**game.infos[seat.name], **{k: seat.reset_info[k] for k in ("system_prompt", "tools", "task_id")
                                           if k in seat.reset_info}}
        self._open(seat.ep, _text(game.obs[seat.name]), info, row_id or seat.ep.traj.task_id)

    # ------------------------------------------------------------------ one cycle

    def _play_cycle(self, live: list[_Game], base: int) -> None:
        acting: dict[int, list[_Seat]] = {}
        for game in live:
            for seat in game.seats.values():
                if seat.ep is not None and seat.opened and not seat.ep.done and \
                        not game.infos[seat.name].get("waiting"):
                    acting.setdefault(id(seat.sampler), []).append(seat)
        for seats in acting.values():
            self._sample_with(seats[0].sampler, [s.ep for s in seats], base)
        for game in live:
            actions = {}
            for seat in game.seats.values():
                if game.infos[seat.name].get("waiting"):
                    continue
                if seat.policy is not None:
                    try:
                        actions[seat.name] = str(seat.policy(_text(game.obs[seat.name]), game.infos[seat.name]))
                    except Exception:  # noqa: BLE001 - a broken reference policy plays nothing this turn
                        actions[seat.name] = ""
                elif seat.ep is not None and seat.opened and not seat.ep.done:
                    actions[seat.name] = seat.ep.action
                    seat.awaiting = True
                else:
                    actions[seat.name] = ""  # its episode has ended; the game goes on
            self._step_game(game, actions)

    def _sample_with(self, sampler: Sampler, episodes: list[EpisodeState], base: int) -> None:
        """The engine's batched turn, with ``sampler`` (the trained one, or a frozen checkpoint)."""
        trained = self.sampler
        self.sampler = sampler
        try:
            self._sample_turn(episodes, base)
        finally:
            self.sampler = trained

    def _step_game(self, game: _Game, actions: Mapping[str, str]) -> None:
        try:
            obs, rewards, terminations, truncations, infos = game.env.step(actions)
        except Exception as e:  # noqa: BLE001 - a broken env step fails the game's episodes, not the run
            for seat in game.seats.values():
                if seat.ep is not None and not seat.ep.done:
                    self._fail(seat.ep, failure_text("env step", e))
            game.over = True
            return
        game.obs, game.infos = obs, infos
        game.over = not game.env.agents
        for seat in game.seats.values():
            seat.reward += float(rewards.get(seat.name, 0.0))
            ep = seat.ep
            if ep is None or ep.done:
                continue
            if seat.awaiting and (game.over or not infos[seat.name].get("waiting")):
                seat.awaiting = False
                reward, seat.reward = seat.reward, 0.0
                try:
                    self._after_step(ep, _text(obs[seat.name]), reward, terminations[seat.name],
                                     truncations[seat.name], infos[seat.name])
                except Exception as e:  # noqa: BLE001 - e.g. a reply the chat template cannot render
                    self._fail(ep, failure_text("env reply", e))
            elif not seat.opened and game.over:  # the game ended before this seat ever acted
                ep.traj.final_info = dict(infos[seat.name])
                ep.traj.terminated, ep.traj.truncated = bool(terminations[seat.name]), bool(truncations[seat.name])
                self._finish(ep, "terminated" if terminations[seat.name] else "truncated")
                ep.traj.reward = seat.reward
            elif not seat.opened:
                self._open_if_acting(game, seat)
        if game.over:
            self._idle_envs.append(game.env)

    def _release_seat(self, seat: _Seat) -> None:
        trained = self.sampler
        self.sampler = seat.sampler or trained
        try:
            self._release(seat.ep)
        finally:
            self.sampler = trained
        # Per-seat numbers: the trainer's batch means become rollout/seat/<seat>/reward, .../win, ...
        t = seat.ep.traj
        t.metrics[f"seat/{seat.name}/reward"] = float(t.reward)
        outcome = t.final_info.get("outcome")
        if outcome in ("win", "draw", "loss"):
            for name in ("win", "draw", "loss"):
                t.metrics[f"seat/{seat.name}/{name}"] = float(outcome == name)


def _text(observation: Any) -> str:
    return str(observation.get("text", "")) if isinstance(observation, Mapping) else str(observation)


def _is_sampler(player: Any) -> bool:
    return callable(getattr(player, "sample", None)) and callable(getattr(player, "end_session", None))


def _policy(env: Any, seat: str, name: str):
    from mtrl_gym.envs.multiagent.policies import reference_policy

    return reference_policy(env, seat, name)


def collect_multiagent(env: EnvSource, tasks: Sequence[Mapping[str, Any] | None], sampler: Sampler, tokenizer, *,
                       config: RolloutConfig | None = None, seed: int | None = None,
                       seats: Mapping[str, Any] | None = None, **overrides: Any) -> list[Trajectory]:
    """One-call form of :class:`MultiAgentRolloutEngine` (``overrides`` set RolloutConfig fields)."""
    with MultiAgentRolloutEngine(env, sampler, tokenizer, config, seats=seats, **overrides) as engine:
        base = engine.config.seed if seed is None else seed
        return engine.collect(tasks, seed=base)


def refuse_serving_wrappers(env_id: str, wrappers: Sequence[Mapping[str, Any]], *, fix: str = "") -> None:
    """A multi-agent env's seats read its own observations: serving ``wrappers`` are refused."""
    if wrappers:
        names = sorted({w["name"] for w in wrappers})
        raise ConfigError(f"serving wrappers {names} are for single-agent envs; the seats of {env_id} read its own "
                          f"observations{fix}")


def make_selfplay_engine(config: Any, options: SelfPlayOptions, sampler: Sampler, tokenizer, *,
                         validation: bool = False, env: EnvSource | None = None) -> MultiAgentRolloutEngine:
    """The ``selfplay`` source of a run: its multi-agent env (``env`` replaces ``config.env``), seats as
    ``options`` say, training or validation rollouts."""
    from mtrl_gym.rollout.sources.local import build_wrappers, rollout_config

    if config.serving.constrained:
        raise ConfigError("`constrained` sampling is for single-agent envs; multi-agent seats sample unconstrained")
    refuse_serving_wrappers(config.env, config.serving.wrappers)
    specs = config.validation.env_wrappers if validation else config.env_wrappers
    return MultiAgentRolloutEngine(env if env is not None else config.env, sampler, tokenizer,
                                   rollout_config(config, validation=validation), seats=dict(options.seats),
                                   wrappers=build_wrappers(specs))
