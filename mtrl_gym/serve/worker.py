"""One thread owns the sampler and batches the requests of concurrent sessions.

Samplers are not thread-safe and are fastest on batches (HF decodes a batch per forward
pass; vLLM schedules a batch). HTTP handlers therefore never call the sampler: they
:meth:`SamplerWorker.submit` a :class:`~mtrl_gym.rollout.samplers.base.SampleRequest`
and await its future. The worker takes the first waiting request, then gathers more
until every *live* session (as counted by the ``live`` callable: sessions that are open
and have not yet reported a reward) has one waiting, or no new request came for
``gather_s`` seconds (at most ``10 * gather_s`` in all), and samples them in one call.
With 8 agents in lock-step, every decoding step samples 8 rows, as the in-process rollout
engine does.

``end_session`` calls are queued too, so a sampler's per-session KV cache is only touched
from the worker thread. :meth:`pause` stops new work (the trainer updates the weights
between steps) and waits for the batch in flight.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from mtrl_gym.serve.protocol import ApiError
from mtrl_gym.rollout.samplers.base import Sampler, SampleRequest, SampleResult

__all__ = ["SamplerWorker"]


class SamplerWorker:
    """Batches sample requests from many threads onto one sampler, in one thread.

    Args:
        sampler: any :class:`~mtrl_gym.rollout.samplers.base.Sampler`.
        live: returns how many sessions may send a request soon (the batch target).
        gather_s: longest gap between arriving requests the worker waits for (the wait
            for a batch never exceeds ``10 * gather_s``).
        max_batch_size: most requests per sampler call (``None``: all waiting).
    """

    def __init__(self, sampler: Sampler, *, live: Callable[[], int] = lambda: 1, gather_s: float = 0.05,
                 max_batch_size: int | None = None):
        self.sampler = sampler
        self.live = live
        self.gather_s = float(gather_s)
        self.max_batch_size = max_batch_size
        self._queue: list[tuple[SampleRequest, Future]] = []
        self._ends: list[str] = []
        self._cond = threading.Condition()
        self._busy = False
        self._paused = False
        self._stopped = False
        self.stats = {"batches": 0, "requests": 0, "max_batch": 0}
        self._thread = threading.Thread(target=self._loop, name="mtrl-serve-sampler", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ callers

    def submit(self, request: SampleRequest) -> Future:
        """Queue a request; the future resolves to its :class:`SampleResult`."""
        future: Future = Future()
        with self._cond:
            if self._stopped:
                raise ApiError("the server is shutting down", status=503, code="unavailable")
            if self._paused:
                raise ApiError("the policy is being updated; retry in a moment", status=503, code="policy_update")
            self._queue.append((request, future))
            self._cond.notify_all()
        return future

    def end_session(self, session_id: str) -> None:
        """Free the sampler's cached state of ``session_id`` (from the worker thread)."""
        with self._cond:
            self._ends.append(session_id)
            self._cond.notify_all()

    def wake(self) -> None:
        """Re-check the batch target (a session ended, so fewer requests are coming)."""
        with self._cond:
            self._cond.notify_all()

    def pause(self) -> None:
        """Refuse new requests (503) and wait until the batch in flight is done."""
        with self._cond:
            self._paused = True
            self._cond.notify_all()
            while self._busy or self._queue:
                self._cond.wait(0.05)

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._stopped = True
            pending, self._queue = self._queue, []
            self._cond.notify_all()
        for _, future in pending:
            future.set_exception(ApiError("the server is shutting down", status=503, code="unavailable"))
        self._thread.join(timeout=5)

    # ------------------------------------------------------------------ worker

    def _take(self) -> list[tuple[SampleRequest, Future]] | None:
        with self._cond:
            while not self._stopped and not self._queue and not self._ends:
                self._cond.wait()
            if self._stopped:
                return None
            self._flush_ends()
            if not self._queue:
                return []
            # Wait while more requests are expected and they keep arriving: until no new one
            # came for `gather_s`, and never longer than 10 x `gather_s` in all.
            start = last = time.monotonic()
            count = len(self._queue)
            while not self._stopped and len(self._queue) < max(self.live(), 1):
                now = time.monotonic()
                if len(self._queue) > count:
                    count, last = len(self._queue), now
                left = min(last + self.gather_s, start + 10 * self.gather_s) - now
                if left <= 0:
                    break
                self._cond.wait(left)
            size = self.max_batch_size or len(self._queue)
            batch, self._queue = self._queue[:size], self._queue[size:]
            self._busy = True
            return batch

    def _flush_ends(self) -> None:
        ends, self._ends = self._ends, []
        for sid in ends:
            try:
                self.sampler.end_session(sid)
            except Exception:  # noqa: BLE001,S110 - freeing a cache must never stop the worker
                pass

    def _loop(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            if not batch:
                continue
            try:
                results = self.sampler.sample([r for r, _ in batch])
                if len(results) != len(batch):
                    raise RuntimeError(f"the sampler returned {len(results)} results for {len(batch)} requests")
            except Exception as e:  # noqa: BLE001 - every request of the batch gets the error
                results = [SampleResult([], [], "error", prompt_tokens=len(r.prompt_ids),
                                        error=f"{type(e).__name__}: {e}") for r, _ in batch]
            self.stats["batches"] += 1
            self.stats["requests"] += len(batch)
            self.stats["max_batch"] = max(self.stats["max_batch"], len(batch))
            for (_, future), result in zip(batch, results):
                future.set_result(result)
            with self._cond:
                self._busy = False
                self._cond.notify_all()
