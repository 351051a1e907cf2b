"""One process of a two-process RolloutFunc run (started twice by test_trl.py, ranks 0 and 1).

Generation is a cross-process collective here, as in TRL's vLLM server mode: every call
gathers all processes' prompts (``accelerate.utils.gather_object``) and each process keeps
its slice of the answers, so it needs every process to call it equally often, with equally
many prompts. Rank 0 plays two episodes of 3 turns, rank 1 one episode of 1 turn. Prints
one JSON line: the generation calls made and each episode's turns.

    RANK=r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=P python trl_two_processes.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ (tiny_models)

from accelerate import PartialState
from accelerate.utils import gather_object
from tiny_models import build_chatml_tokenizer

from mtrl_gym.adapters.trl import RolloutFunc, rollout_dataset


class CollectiveGeneration:
    """TRL's public generation surface, with vLLM server mode's collective behaviour."""

    use_vllm = True

    def __init__(self, state, tokenizer):
        self.accelerator, self.processing_class = state, tokenizer
        self.args = SimpleNamespace(temperature=1.0, max_completion_length=16)
        self.eos_token_ids = [tokenizer.eos_token_id]
        self.vllm_generation = SimpleNamespace(generate=self.generate)
        self.calls = 0

    def generate(self, prompts, images, num_generations, profiler=None):
        self.calls += 1
        everyone = gather_object([len(prompts)])
        if len(set(everyone)) != 1:  # TRL slices the answers by process_index * len(prompts)
            raise RuntimeError(f"unequal prompt counts across processes: {everyone}")
        ids = self.processing_class.encode('guess_word("zzzzz")', add_special_tokens=False) + \
            [self.processing_class.eos_token_id]
        return list(prompts), [list(ids) for _ in prompts], [[[-0.5]] * len(ids) for _ in prompts], None

    # the private entry point earlier adapters called, with the same collective
    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations):
        _, ids, _, _ = self.generate(prompt_ids, images, num_generations)
        return ids, None


def main() -> None:
    state = PartialState(cpu=True)
    tokenizer = build_chatml_tokenizer(vocab_size=600)
    rank = state.process_index
    data = rollout_dataset("mtrl/Wordle-v0", tasks=[{"answer": "paste", "id": f"r{rank}"}], seed=rank)
    prompts = [data[0]["prompt"]] * (2 if rank == 0 else 1)
    generation = CollectiveGeneration(state, tokenizer)
    rollout = RolloutFunc("mtrl/Wordle-v0", max_turns=3 if rank == 0 else 1)
    out = rollout(prompts, generation)
    print(json.dumps({"rank": rank, "calls": generation.calls, "rows": len(out["completion_ids"]),
                      "turns": [t.num_turns for t in rollout.last_trajectories]}), flush=True)
    state.wait_for_everyone()
    state.destroy_process_group()


if __name__ == "__main__":
    main()
