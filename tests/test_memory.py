"""mtrl_gym.memory: per-phase peak RSS, nested phases, and the platform fallback."""

from __future__ import annotations

import sys

import pytest

from mtrl_gym import memory
from mtrl_gym.memory import PeakMemory, peak_rss_mb, rss_mb

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-phase peaks need /proc (Linux)")


def _touch(mib: int) -> bytearray:
    block = bytearray(mib * 2**20)
    block[::4096] = b"x" * len(block[::4096])  # make every page resident
    return block


@linux
def test_each_phase_reports_its_own_peak_not_the_runs():
    peaks = PeakMemory()
    with peaks("big"):
        block = _touch(256)
        del block
    with peaks("small"):
        pass
    assert peaks.per_phase
    assert peaks.mb["big"] >= peaks.mb["small"] + 200  # the reset between phases forgot the 256 MiB


@linux
def test_an_outer_phase_sees_the_peak_of_a_nested_one():
    peaks = PeakMemory()
    with peaks("outer"):
        with peaks("inner"):
            block = _touch(128)
            del block
        with peaks("after"):
            pass
    assert peaks.mb["outer"] >= peaks.mb["inner"] >= peaks.mb["after"] + 100
    assert "outer" in peaks.table(limit_mb=100) and "x of 100 MiB" in peaks.table(limit_mb=100)


def test_without_proc_the_figures_are_the_runs_peak(monkeypatch):
    monkeypatch.setattr(memory, "_STATUS", "/nonexistent/status")
    monkeypatch.setattr(memory, "reset_peak", lambda: False)
    assert rss_mb() == 0.0 and peak_rss_mb() > 0  # getrusage
    peaks = PeakMemory()
    with peaks("a"):
        pass
    assert peaks.per_phase is False and peaks.mb["a"] > 0


@linux
def test_release_hands_freed_memory_back():
    import torch

    blocks = [torch.ones(16, 1024) for _ in range(16384)]  # 1 GiB in 64 KiB tensors: heap, not mmap
    pin = torch.ones(16, 1024)  # allocated last: the heap's top cannot shrink by itself
    held = rss_mb()
    del blocks
    assert rss_mb() > held - 100  # free() alone keeps the pages
    freed = memory.release()
    assert rss_mb() < held - 500 and freed > 500
    del pin
