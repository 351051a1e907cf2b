"""Fixtures of the adapter tests: tiny tokenizers and models, scripted policies.

The adapter tests run against the real outside packages (verifiers, TRL, OpenEnv), each in
the venv that has it; a test whose package is missing is skipped with the install line.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tiny_models import build_chatml_tokenizer, build_tiny_llama

#: The scripted Wordle game every cross-adapter test plays: a miss, a bad message, the solve.
WORDLE_TASK = {"answer": "paste", "id": "cross-0"}
WORDLE_SEED = 7
WORDLE_GUESSES = ["crane", "paste"]
BAD_TEXT = "I think... \ud800 <tool_call>{not json</tool_call> guess_word(" + "x" * 50



def _hide_test_folder_named_vllm() -> None:
    """``tests/`` is on ``sys.path`` (pytest ``pythonpath``), so ``tests/vllm`` is found as a
    namespace package ``vllm``; TRL probes for vLLM at import and fails on its missing version.
    Where no real vLLM is installed, mark ``vllm`` absent."""
    spec = importlib.util.find_spec("vllm") if "vllm" not in sys.modules else None
    tests = Path(__file__).resolve().parents[1]
    if spec is not None and spec.origin is None and all(
            Path(p).resolve().parent == tests for p in spec.submodule_search_locations or ()):
        sys.modules["vllm"] = None


_hide_test_folder_named_vllm()


@pytest.fixture(scope="session")
def tool_tokenizer():
    """A tiny BPE tokenizer with TRL's Qwen2.5 chat template (renders tools and tool calls)."""
    pytest.importorskip("trl")
    from trl.chat_template_utils import qwen2_5_chat_template

    tok = build_chatml_tokenizer(vocab_size=600)
    tok.chat_template = qwen2_5_chat_template
    return tok


@pytest.fixture()
def tool_model(tool_tokenizer):
    """A tiny random Llama for ``tool_tokenizer`` (fresh per test: the trainer updates it)."""
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return build_tiny_llama(len(tool_tokenizer), seed=0)
