"""Wordle task ids that name a task without revealing its answer.

``info["task_id"]`` is logged and forwarded by agent harnesses, so it must not let anyone
recover the secret. A task row's own ``id`` is used as is (``wordle_train_0007``); a
secret without one (drawn from the answer list, or pinned with ``options={"answer": ...}``)
gets ``"wordle-" + blake2b(answer, key=K)`` (10 hex digits), where ``K`` is a private
per-install key:

* ``$MTRL_GYM_TASK_ID_KEY`` if set (any string; set the same value on every machine of a
  cluster to get the same ids everywhere);
* else 32 random bytes created once in ``<cache dir>/wordle/task-id.key`` (the cache dir of
  :func:`mtrl_gym.envs.wordle.game.cache_dir`), so ids are stable across processes and
  runs on one machine;
* else, when that folder cannot be written, a key for this process only (ids are then
  stable within the process).

With the key unknown, the 1,923 possible answers cannot be hashed to match an id: unlike
a hash with a public constant, the id is not invertible by enumeration.

>>> task_id_for("crane", key=b"k") == task_id_for("crane", key=b"k") != task_id_for("crane", key=b"other")
True
"""

from __future__ import annotations

import functools
import hashlib
import os
import secrets
import tempfile

from mtrl_gym.envs.wordle.game import cache_dir

__all__ = ["task_id_for", "task_id_key", "KEY_ENV"]

#: Environment variable that sets the task-id key explicitly.
KEY_ENV = "MTRL_GYM_TASK_ID_KEY"
_KEY_BYTES = 32


def task_id_for(answer: str, *, key: bytes | None = None) -> str:
    """The id of a Wordle task without a row id: ``answer`` hashed with ``key`` (default :func:`task_id_key`)."""
    if key is None:
        return _cached_id(answer)
    return "wordle-" + hashlib.blake2b(answer.encode(), digest_size=5, key=key[:64]).hexdigest()


@functools.lru_cache(maxsize=4096)  # every answer of the list fits: resets skip the hash
def _cached_id(answer: str) -> str:
    return task_id_for(answer, key=task_id_key())


@functools.cache
def task_id_key() -> bytes:
    """This install's private key (see the module docstring); read once per process."""
    explicit = os.environ.get(KEY_ENV)
    if explicit:
        return hashlib.blake2b(explicit.encode("utf-8", "surrogatepass"), digest_size=32).digest()
    path = cache_dir() / "wordle" / "task-id.key"
    stored = _read_key(path)
    if stored is not None:
        return stored
    key = secrets.token_bytes(_KEY_BYTES)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".key.tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(key)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)  # atomic and exclusive: of two processes racing, one key wins
            except FileExistsError:
                if _read_key(path) is None:  # a damaged file (wrong size): replace it
                    os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        stored = _read_key(path)
        return key if stored is None else stored
    except OSError:  # read-only home: ids stable within this process only
        return key


def _read_key(path) -> bytes | None:
    try:
        key = path.read_bytes()
    except OSError:
        return None
    return key if len(key) == _KEY_BYTES else None
