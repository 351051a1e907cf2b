"""Resident memory of this process, and its peak per named phase.

:class:`PeakMemory` records the peak resident set size (RSS) of each phase of a run::

    peaks = PeakMemory()
    with peaks("sft"):
        ...
    with peaks("grpo"):
        with peaks("grpo/update"):   # phases may nest: the outer one still sees the inner peak
            ...
    peaks.mb   # {"sft": 2210.4, "grpo/update": 2630.1, "grpo": 2630.1}

On Linux the kernel keeps the peak (``VmHWM`` in ``/proc/self/status``) and lets a process
reset it to the current RSS (writing ``5`` to ``/proc/self/clear_refs``), so each phase's
figure is its own peak, not the run's so far. Elsewhere only the run's peak is known
(``getrusage``); :attr:`PeakMemory.per_phase` is then False and each figure is the peak of
the run up to the end of that phase.

>>> peaks = PeakMemory()
>>> with peaks("a"):
...     block = bytearray(64 * 2**20)
>>> peaks.mb["a"] >= rss_mb() - 1
True
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

__all__ = ["PeakMemory", "rss_mb", "peak_rss_mb", "reset_peak", "release"]

_STATUS = "/proc/self/status"


def _status_kb(key: str) -> float | None:
    try:
        with open(_STATUS) as f:
            for line in f:
                if line.startswith(key + ":"):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def rss_mb() -> float:
    """This process's resident set size now, in MiB (0 where the platform does not say)."""
    kb = _status_kb("VmRSS")
    return kb / 1024 if kb is not None else 0.0


def peak_rss_mb() -> float:
    """The peak RSS since the process started or since the last :func:`reset_peak`, in MiB."""
    kb = _status_kb("VmHWM")
    if kb is not None:
        return kb / 1024
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def reset_peak() -> bool:
    """Reset the kernel's peak RSS to the current RSS; False where the platform cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def release() -> float:
    """Hand memory freed by Python and PyTorch back to the operating system; returns the MiB the RSS fell by.

    Freed tensors go back to the C allocator, which keeps the pages for reuse: after an SFT run
    the process still holds its peak (5.4 GB for the main job's 540 MB model). Between the
    stages of one process (SFT, then GRPO, then evaluations) call this so that each stage
    starts from what is really in use: a garbage collection, then glibc's ``malloc_trim``
    (a no-op elsewhere).
    """
    import ctypes
    import ctypes.util
    import gc

    before = rss_mb()
    gc.collect()
    name = ctypes.util.find_library("c")
    if name and sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(name).malloc_trim(0)
        except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
            pass
    return max(0.0, before - rss_mb())


class PeakMemory:
    """Peak RSS (MiB) of each named phase; phases may nest. See the module docstring."""

    def __init__(self) -> None:
        self.mb: dict[str, float] = {}
        self.per_phase = os.path.exists("/proc/self/clear_refs")
        self._open: list[str] = []

    def _fold(self) -> None:
        """Credit the peak since the last reset to every open phase."""
        peak = peak_rss_mb()
        for name in self._open:
            self.mb[name] = max(self.mb.get(name, 0.0), peak)

    @contextlib.contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        self._fold()
        self._open.append(phase)
        if self.per_phase:
            self.per_phase = reset_peak()
        self.mb[phase] = max(self.mb.get(phase, 0.0), rss_mb())
        try:
            yield
        finally:
            self._fold()
            self._open.remove(phase)

    def table(self, limit_mb: float | None = None) -> str:
        """One line per phase: ``name  peak MiB`` (and the share of ``limit_mb``)."""
        width = max((len(n) for n in self.mb), default=5)
        lines = []
        for name, mb in self.mb.items():
            tail = f"  ({mb / limit_mb:.2f}x of {limit_mb:.0f} MiB)" if limit_mb else ""
            lines.append(f"{name:<{width}}  {mb:7.0f} MiB{tail}")
        return "\n".join(lines)
