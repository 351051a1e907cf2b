"""Record episodes to a JSONL file and replay them to check that an env is deterministic.

:class:`RecordEpisodes` appends one JSON object per episode to ``path``: the seed and
reset options, the env spec (so the env can be rebuilt), the reset observation and info,
and every step's action, observation, reward, flags and info. An episode is written the
moment it ends (``terminated`` or ``truncated``); an episode cut short by ``reset`` or
``close`` is written too, with ``"finished": false``. Each record is one ``os.write`` of a
whole line to a file opened in append mode, under an exclusive ``flock`` where the OS has
one, so several processes (``AsyncVectorEnv`` workers) can share a file.

Every recorded episode has a seed, so each one replays on its own: when ``reset`` is
called without a seed (as vector envs do on autoreset), the recorder draws the episode's
seed from a generator seeded by the last explicit seed and passes it down. A run is thus
reproducible from its first seed, per vector env index.

:func:`replay_episode` rebuilds the env from the record (or takes one), replays the
actions and raises :class:`~mtrl_gym.error.ReplayMismatch` at the first difference.
Run it on your own envs to check the determinism contract of docs/architecture.md.

>>> import gymnasium, mtrl_gym, tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "episodes.jsonl")
>>> env = RecordEpisodes(gymnasium.make("mtrl/Wordle-v0"), path)
>>> _ = env.reset(seed=3)
>>> for word in ["crane", "pious"]:
...     _ = env.step(f"<guess>{word}</guess>")
>>> env.close()  # writes the unfinished episode too
>>> [record] = load_episodes(path)
>>> record["seed"], len(record["steps"]), record["finished"]
(3, 2, False)
>>> len(replay_episode(record)["steps"])
2
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from gymnasium.envs.registration import EnvSpec
from gymnasium.utils import RecordConstructorArgs

from mtrl_gym.jsonl import iter_jsonl
from mtrl_gym.error import ConfigError, DatasetError, ReplayMismatch
from mtrl_gym.serialization import MAX_DEPTH, json_line, json_safe

try:  # POSIX: serialise appends from several processes
    import fcntl
except ImportError:  # pragma: no cover - Windows: O_APPEND single writes only
    fcntl = None

__all__ = ["RecordEpisodes", "replay_episode", "load_episodes", "iter_episodes", "RECORD_FORMAT"]

#: Value of the ``"format"`` field of every record.
RECORD_FORMAT = "mtrl_gym.episode/v1"
_SEED_SALT = 0x5245434F  # "RECO"


def _spec_json(env: gymnasium.Env) -> str | None:
    """The env's spec as JSON if ``gymnasium.make`` can rebuild the env from it, else None."""
    spec = env.spec
    if spec is None or any(w.kwargs is None for w in spec.additional_wrappers):
        return None
    try:
        return spec.to_json()
    except (TypeError, ValueError, gymnasium.error.Error):
        return None


def _append_line(path: Path, line: str, fsync: bool) -> None:
    data = memoryview(line.encode("utf-8"))
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        while data:
            data = data[os.write(fd, data):]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)  # also releases the lock


class RecordEpisodes(gymnasium.Wrapper, RecordConstructorArgs):
    """Append every episode to a JSONL file (see the module docstring for the format).

    Args:
        env: any env; put this wrapper outermost to record what the agent saw and got.
        path: the JSONL file (created with its parent folders; appended to).
        fsync: ``os.fsync`` after every record (survives a machine crash; slower).

    ``RecordEpisodes(WordleShaping(gymnasium.make("mtrl/Wordle-v0")), "runs/episodes.jsonl")``;
    with ``gymnasium.make_vec(..., wrappers=[functools.partial(RecordEpisodes, path=p)])``
    every sub-env appends to the same file safely.
    """

    def __init__(self, env: gymnasium.Env, path: str | os.PathLike, *, fsync: bool = False):
        RecordConstructorArgs.__init__(self, path=str(path), fsync=fsync)
        gymnasium.Wrapper.__init__(self, env)
        if not isinstance(path, (str, os.PathLike)) or not str(path):
            raise ConfigError(f"`path` must be a file path (str or PathLike), got {path!r}")
        self.path = Path(path)
        if self.path.is_dir():
            raise ConfigError(f"`path` must be a file, got the folder {str(self.path)!r}; "
                              "add a file name such as episodes.jsonl")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fsync = bool(fsync)
        self.episodes_written = 0
        self._spec = _spec_json(env)
        self._seeds: np.random.Generator | None = None
        self._episode: dict[str, Any] | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._write_unfinished()
        if seed is not None:
            self._seeds = np.random.default_rng([int(seed), _SEED_SALT])
            episode_seed = int(seed)
        else:
            if self._seeds is None:
                self._seeds = np.random.default_rng()
            episode_seed = int(self._seeds.integers(2**31))
        obs, info = self.env.reset(seed=episode_seed, options=options)
        self._episode = {
            "format": RECORD_FORMAT,
            "env_id": self.env.spec.id if self.env.spec is not None else None,
            "env_spec": self._spec,
            "seed": episode_seed,
            "options": json_safe(options),
            "task_id": json_safe(info.get("task_id")),
            "reset": {"observation": json_safe(obs), "info": json_safe(info)},
            "steps": [],
        }
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self._episode is not None:
            self._episode["steps"].append({
                "action": json_safe(action), "observation": json_safe(obs), "reward": json_safe(float(reward)),
                "terminated": bool(terminated), "truncated": bool(truncated), "info": json_safe(info),
            })
            if terminated or truncated:
                self._write(finished=True)
        return obs, reward, terminated, truncated, info

    def close(self):
        self._write_unfinished()
        super().close()

    def _write_unfinished(self) -> None:
        if self._episode is not None and self._episode["steps"]:
            self._write(finished=False)
        self._episode = None

    def _write(self, *, finished: bool) -> None:
        record = self._episode
        self._episode = None
        total = 0.0
        for s in record["steps"]:
            total += float(s["reward"])  # json_safe wrote a non-finite reward as "nan"/"inf"
        record.update(finished=finished, length=len(record["steps"]), **{"return": json_safe(total)})
        _append_line(self.path, json_line(record, max_depth=MAX_DEPTH + 8) + "\n", self.fsync)
        self.episodes_written += 1


def iter_episodes(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """Yield the records of a file written by :class:`RecordEpisodes`, in file order.

    A truncated last line (a process killed mid-write) is skipped; any other broken line
    raises :class:`~mtrl_gym.error.DatasetError` naming the file and line.
    """
    for i, record in iter_jsonl(path):
        if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT:
            raise DatasetError(f"not an episode record (expected format {RECORD_FORMAT!r})", path=str(path), line=i)
        yield record


def load_episodes(path: str | os.PathLike) -> list[dict[str, Any]]:
    """All records of a file written by :class:`RecordEpisodes` (see :func:`iter_episodes`)."""
    return list(iter_episodes(path))


def _plain(value: Any) -> Any:
    """``value`` as it reads back from a record (JSON types only)."""
    return json.loads(json.dumps(json_safe(value), allow_nan=False))


def _short(value: Any, limit: int = 200) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."


def _compare(where: str, field: str, recorded: Any, replayed: Any) -> None:
    recorded, replayed = _plain(recorded), _plain(replayed)
    if recorded == replayed:
        return
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        for key in sorted(recorded.keys() | replayed.keys()):
            if recorded.get(key, "<missing>") != replayed.get(key, "<missing>"):
                field = f"{field}[{key!r}]"
                recorded, replayed = recorded.get(key, "<missing>"), replayed.get(key, "<missing>")
                break
    raise ReplayMismatch(f"{where}: {field} differs: recorded {_short(recorded)}, replayed {_short(replayed)}. "
                         "The env is not deterministic for this seed and these actions (or the record "
                         "came from a different env version).")


def replay_episode(record: Mapping[str, Any], env: gymnasium.Env | None = None, *,
                   check_info: bool = True) -> dict[str, Any]:
    """Replay a recorded episode and check that every step comes out the same.

    Args:
        record: one record of :func:`load_episodes`.
        env: the env to replay on; by default a fresh one built from ``record["env_spec"]``
            (then closed afterwards). It must be the env *below* the recorder.
        check_info: also compare the ``info`` dicts (observations, rewards and flags always are).

    Returns:
        The replayed record (same layout, ``finished`` as recorded).

    Raises:
        ReplayMismatch: at the first difference, naming the step and field.
    """
    if not isinstance(record, Mapping) or record.get("format") != RECORD_FORMAT:
        raise ConfigError(f"`record` must be a record of load_episodes() (format {RECORD_FORMAT!r}), "
                          f"got {_short(_plain(record), 80)}")
    own = env is None
    if own:
        if not record.get("env_spec"):
            raise ConfigError("this record has no env spec (the env was not built by gymnasium.make, or a "
                              "wrapper below the recorder cannot be rebuilt from its arguments); "
                              "pass the env to replay on: replay_episode(record, env=...)")
        env = gymnasium.make(EnvSpec.from_json(record["env_spec"]))
    try:
        return _replay(record, env, check_info)
    finally:
        if own:
            env.close()


def _replay(record: Mapping[str, Any], env: gymnasium.Env, check_info: bool) -> dict[str, Any]:
    obs, info = env.reset(seed=record["seed"], options=record.get("options"))
    _compare("reset", "observation", record["reset"]["observation"], obs)
    if check_info:
        _compare("reset", "info", record["reset"]["info"], info)
    replayed = {**record, "reset": {"observation": _plain(obs), "info": _plain(info)}, "steps": []}
    for i, step in enumerate(record["steps"], start=1):
        obs, reward, terminated, truncated, info = env.step(step["action"])
        got = {"observation": obs, "reward": float(reward), "terminated": bool(terminated),
               "truncated": bool(truncated), "info": info}
        for field in ("observation", "reward", "terminated", "truncated", *(("info",) if check_info else ())):
            _compare(f"step {i}", field, step[field], got[field])
        replayed["steps"].append({"action": step["action"], **{k: _plain(v) for k, v in got.items()}})
    return replayed
