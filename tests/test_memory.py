"""mtrl_gym.memory: per-phase peak RSS, nested phases, and the platform fallback."""

from __future__ import annotations

import sys

import pytest

from mtrl_gym import memory
from mtrl_gym.memory import PeakMemory, peak_rss_mb, rss_mb

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-phase peaks need /proc (Linux)")


def _in_a_fresh_process(body: str) -> dict:
    """Run ``body`` in a new interpreter (the suite's own process holds freed pages that blur peaks)."""
    import json
    import subprocess
    import textwrap

    code = textwrap.dedent("""
        import json
        from mtrl_gym.memory import PeakMemory
        def touch(mib):
            block = bytearray(mib * 2**20)
            block[::4096] = b"x" * len(block[::4096])  # make every page resident
            return block
        peaks = PeakMemory()
    """) + textwrap.dedent(body) + "\nprint(json.dumps({'mb': peaks.mb, 'per_phase': peaks.per_phase, 'table': peaks.table(limit_mb=100)}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.splitlines()[-1])


@linux
def test_each_phase_reports_its_own_peak_not_the_runs():
    r = _in_a_fresh_process("""
        with peaks("big"):
            block = touch(256)
            del block
        with peaks("small"):
            pass
    """)
    assert r["per_phase"]
    assert r["mb"]["big"] >= r["mb"]["small"] + 200  # the reset between phases forgot the 256 MiB


@linux
def test_an_outer_phase_sees_the_peak_of_a_nested_one():
    r = _in_a_fresh_process("""
        with peaks("outer"):
            with peaks("inner"):
                block = touch(128)
                del block
            with peaks("after"):
                pass
    """)
    mb = r["mb"]
    assert mb["outer"] >= mb["inner"] >= mb["after"] + 100
    assert "outer" in r["table"] and "x of 100 MiB" in r["table"]


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
