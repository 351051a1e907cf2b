"""Seconds per GRPO step and trained tokens/s: mtrl_gym's trainer vs TRL's GRPOTrainer, one run.

    .venv-trl/bin/python benchmarks/trainer_vs_trl.py [--weights random|pretrained] [--prompts 2]
        [--group-size 8] [--max-new-tokens 32] [--steps 2] [--rounds 2] [--threads 2]

Both trainers do the same work in the same process, on the same CPU threads:

* the same model: SmolLM2-135M-Instruct's architecture, with random weights (default; a
  random model almost never emits EOS, so every completion is exactly ``--max-new-tokens``
  long on both sides and the token counts match) or the embedded pretrained weights
  (``--weights pretrained``: more realistic text, but completion lengths then differ
  between the two runs; compare tokens/s then);
* the same LoRA adapter (rank 32, alpha 64, all linear layers, no dropout: the service
  default), learning rate, temperature 1.0, and no KL term (TRL's default ``beta=0``);
* the same batch: ``--prompts`` prompts x ``--group-size`` completions per step, one
  optimiser step per batch (``num_iterations=1``), ``--max-new-tokens`` per completion;
* single-turn prompts (TRL's GRPOTrainer samples one completion per prompt), the same
  system prompt and user text, and the same reward (the fraction of vowels among the
  letters of the completion, so groups almost never tie). ``--prompt short`` is a 36-token
  chat prompt; ``--prompt wordle`` is Wordle-v0's real first prompt (system prompt with the
  tool schema, 459 tokens), the kind of prompt an agent trains on;
* TRL with ``use_vllm=False``, gradient checkpointing off (its default is on, which would
  only slow it down) and the same precision as mtrl_gym's column (fp32, or bf16 autocast
  with ``--bf16``). mtrl_gym keeps zero-variance groups (``drop_zero_variance_groups=False``),
  as TRL does.

Rounds alternate (mtrl_gym's steps, then TRL's steps) so that load on a shared machine hits
both; the first step of each trainer is a warm-up and is not counted. Printed: median wall
seconds and CPU seconds (of this process: robust when other jobs share the machine) per
step of each, trained (completion) tokens per second, and the ratios TRL / mtrl_gym
(> 1: mtrl_gym is faster; the goal of issue 7 is >= 1.5). Use ``--threads 1`` on a machine
shared with other jobs: oversubscribed OpenMP threads spin and slow both sides down erratically.

TRL is not a dependency of mtrl_gym; install it in a separate venv whose base is the
project's (the command above), e.g. ``python -m venv .venv-trl``, a ``.pth`` file pointing
at ``.venv``'s site-packages, then ``.venv-trl/bin/pip install trl datasets``.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

import gymnasium
import torch
from gymnasium import spaces

PROMPTS = {
    # a short chat prompt (36 tokens with SmolLM2's template)
    "short": ("You are a helpful assistant. Answer in one short paragraph.",
              "Describe a walk along a river in early spring.", []),
}


def wordle_prompt() -> tuple[str, str, list]:
    """Wordle-v0's first prompt exactly as an agent sees it: system prompt, tools, task."""
    env = gymnasium.make("mtrl/Wordle-v0")
    obs, info = env.reset(seed=0, options={"answer": "paste"})
    return info["system_prompt"], obs, info["tools"]


def vowel_fraction(text: str) -> float:
    letters = [c for c in text.lower() if c.isalpha()]
    return sum(c in "aeiou" for c in letters) / len(letters) if letters else 0.0


def make_env_class(system: str, user: str, tools: list):
    class VowelEnv(gymnasium.Env[str, str]):
        """One turn of the benchmark prompt; reward = :func:`vowel_fraction` of the reply."""

        reward_range = (0.0, 1.0)

        def __init__(self):
            self.observation_space = spaces.Text(100_000)
            self.action_space = spaces.Text(100_000)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return user, {"system_prompt": system, "tools": tools, "task_id": "bench"}

        def step(self, action):
            info = {"tool_calls": [], "tool_results": [], "format_error": False}
            return "", vowel_fraction(action), True, False, info

    return VowelEnv


def build_model(weights: str, seed: int):
    from transformers import AutoConfig, AutoModelForCausalLM

    from mtrl_gym import models

    path = models.embedded_path("smollm2-135m")
    if weights == "pretrained":
        return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    torch.manual_seed(seed)
    config = AutoConfig.from_pretrained(path)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def lora_config():
    from peft import LoraConfig

    return LoraConfig(r=32, lora_alpha=64, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")


# ---------------------------------------------------------------------------- mtrl_gym

class Ours:
    def __init__(self, args, tokenizer, workdir: Path, env_class):
        from mtrl_gym.trainers.grpo.config import GRPOConfig
        from mtrl_gym.trainers.grpo.trainer import GRPOTrainer

        model = build_model(args.weights, args.seed)
        config = GRPOConfig(output_dir=str(workdir / "mtrl"), global_batch_size=args.prompts, group_size=args.group_size,
                            max_steps=10_000, serving={"max_new_tokens": args.max_new_tokens, "temperature": 1.0},
                            episode={"max_turns": 1, "max_tokens": 4096}, lora={"rank": 32, "alpha": 64.0},
                            learning_rate=1e-5, tracking={"tracker": "none", "log_trajectories": 0}, progress=False,
                            validation={"every": 0}, checkpoints={"save_every": 0},
                            objective={"drop_zero_variance_groups": False}, optimizer={"max_grad_norm": 1.0},
                            autocast_dtype="bfloat16" if args.bf16 else None, packing=args.packing,
                            seed=args.seed)
        tasks = [{"id": f"river{i}"} for i in range(args.prompts)]
        self.trainer = GRPOTrainer(config, model=model, tokenizer=tokenizer, env=env_class, train_tasks=tasks,
                                   val_tasks=None)
        self.seconds: list[float] = []
        self.cpu: list[float] = []
        self.tokens: list[float] = []
        self.phases: list[dict[str, float]] = []

    def run(self, steps: int) -> None:
        for _ in range(steps):
            start, cpu = time.perf_counter(), time.process_time()
            metrics = self.trainer.train_step()
            self.seconds.append(time.perf_counter() - start)
            self.cpu.append(time.process_time() - cpu)
            self.tokens.append(metrics["train/trained_tokens"])
            self.phases.append({k: metrics.get(f"time/{k}_s", 0.0) for k in ("rollout", "update")})


# ---------------------------------------------------------------------------- TRL

class Theirs:
    def __init__(self, args, tokenizer, workdir: Path, messages: list):
        from datasets import Dataset
        from transformers import TrainerCallback
        from trl import GRPOConfig as TRLConfig
        from trl import GRPOTrainer as TRLTrainer

        self.args = args
        self.dataset = Dataset.from_list([{"prompt": messages}] * (args.prompts * 1000))
        self.seconds: list[float] = []
        self.cpu: list[float] = []
        self.tokens: list[float] = []
        outer = self

        class Timer(TrainerCallback):
            def on_step_begin(self, *a, **k):
                self.start, self.cpu = time.perf_counter(), time.process_time()

            def on_step_end(self, *a, **k):
                outer.seconds.append(time.perf_counter() - self.start)
                outer.cpu.append(time.process_time() - self.cpu)

            def on_log(self, _args, _state, _control, logs=None, **k):
                if logs and "completions/mean_length" in logs:
                    outer.tokens.append(logs["completions/mean_length"] * args.prompts * args.group_size)

        def reward(completions, **kwargs):
            return [vowel_fraction(c[0]["content"] if isinstance(c, list) else c) for c in completions]

        n = args.prompts * args.group_size
        rows = min(args.trl_micro_batch or n, n)
        if n % rows:
            raise SystemExit(f"--trl-micro-batch {rows} must divide prompts x group size = {n}")
        self.config = TRLConfig(
            output_dir=str(workdir / "trl"), per_device_train_batch_size=rows, gradient_accumulation_steps=n // rows,
            num_generations=args.group_size, max_completion_length=args.max_new_tokens, temperature=1.0,
            learning_rate=1e-5, beta=0.0, num_iterations=1, use_vllm=False, use_cpu=True,
            bf16=args.bf16, fp16=False, gradient_checkpointing=False, logging_steps=1, report_to=[],
            save_strategy="no", max_steps=1, seed=args.seed, disable_dropout=True, max_grad_norm=1.0,
            dataloader_num_workers=0, log_completions=False)
        self.trainer = TRLTrainer(model=build_model(args.weights, args.seed), reward_funcs=reward, args=self.config,
                                  train_dataset=self.dataset, processing_class=tokenizer, peft_config=lora_config(),
                                  callbacks=[Timer()])

    def run(self, steps: int) -> None:
        self.trainer.args.max_steps = steps
        self.trainer.train()


# ---------------------------------------------------------------------------- main

def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", choices=("random", "pretrained"), default="random")
    parser.add_argument("--prompt", choices=("short", "wordle"), default="short",
                        help="short: a 36-token chat prompt; wordle: Wordle-v0's first prompt with its tools")
    parser.add_argument("--packing", default="auto", help="mtrl_gym's micro-batch layout (GRPOConfig.packing)")
    parser.add_argument("--trl-micro-batch", type=int, default=0,
                        help="TRL's per_device_train_batch_size (completions per forward/backward; gradients "
                             "accumulate over prompts x group size / this, still one optimiser step per batch). "
                             "0: the whole batch at once. Long prompts need a smaller value to fit in memory.")
    parser.add_argument("--prompts", type=int, default=2, help="prompts (tasks) per step")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--steps", type=int, default=2, help="steps per round and trainer")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--bf16", action="store_true", help="both train under bf16 autocast")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:
        import trl
    except ImportError:
        print("TRL is not installed in this environment; see the module docstring", file=sys.stderr)
        return 2
    import transformers

    from mtrl_gym import models

    torch.set_num_threads(args.threads)
    tokenizer = models.load_tokenizer("smollm2-135m")
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, trl {trl.__version__}, "
          f"{args.threads} threads; SmolLM2-135M ({args.weights} weights), LoRA r32/a64 all-linear, "
          f"{args.prompts} prompts x {args.group_size} completions x {args.max_new_tokens} new tokens, "
          f"{'bf16 autocast' if args.bf16 else 'fp32'}")
    from mtrl_gym.rollout.template import ChatRenderer

    system, user, tools = PROMPTS[args.prompt] if args.prompt in PROMPTS else wordle_prompt()
    renderer = ChatRenderer(tokenizer)
    messages = renderer.first_messages(system, tools, user)  # what the rollout engine sends
    prompt_tokens = len(renderer.prompt_ids(messages, tools))
    trl_tokens = len(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                                   return_dict=True)["input_ids"])
    print(f"prompt: {args.prompt}, {prompt_tokens} tokens (TRL renders {trl_tokens})")
    with tempfile.TemporaryDirectory() as tmp:
        ours = Ours(args, tokenizer, Path(tmp), make_env_class(system, user, tools))
        theirs = Theirs(args, tokenizer, Path(tmp), messages)
        ours.run(1)  # warm-up
        theirs.run(1)
        ours.seconds, ours.cpu, ours.tokens, ours.phases = [], [], [], []
        theirs.seconds, theirs.cpu, theirs.tokens = [], [], []
        for r in range(args.rounds):
            ours.run(args.steps)
            theirs.run(args.steps)
            gc.collect()
            print(f"round {r + 1}: wall s/step mtrl_gym {[round(x, 1) for x in ours.seconds[-args.steps:]]}, "
                  f"TRL {[round(x, 1) for x in theirs.seconds[-args.steps:]]}", flush=True)
    report(ours, theirs)
    return 0


def report(ours: Ours, theirs: Theirs) -> None:
    """Wall seconds, and CPU seconds of this process (robust on a shared machine), per step."""
    o_s, t_s = statistics.median(ours.seconds), statistics.median(theirs.seconds)
    o_c, t_c = statistics.median(ours.cpu), statistics.median(theirs.cpu)
    o_tps = sum(ours.tokens) / sum(ours.seconds)
    t_tps = sum(theirs.tokens) / sum(theirs.seconds) if theirs.tokens else float("nan")
    rollout = statistics.median(p["rollout"] for p in ours.phases)
    update = statistics.median(p["update"] for p in ours.phases)
    print(f"{'':<10}{'wall s/step':>13}{'cpu s/step':>12}{'trained tok/s':>15}{'tokens/step':>13}")
    print(f"{'mtrl_gym':<10}{o_s:>13.2f}{o_c:>12.2f}{o_tps:>15.1f}{statistics.mean(ours.tokens):>13.0f}"
          f"   (wall: rollout {rollout:.2f} s, update {update:.2f} s)")
    print(f"{'TRL':<10}{t_s:>13.2f}{t_c:>12.2f}{t_tps:>15.1f}"
          f"{statistics.mean(theirs.tokens) if theirs.tokens else 0:>13.0f}")
    ratio, cpu_ratio = t_s / o_s, t_c / o_c
    print(f"ratio TRL / mtrl_gym, seconds per step: wall {ratio:.2f}x, cpu {cpu_ratio:.2f}x "
          f"({'meets' if min(ratio, cpu_ratio) >= 1.5 else 'misses'} the >= 1.5x goal); "
          f"trained tokens/s {o_tps / t_tps:.2f}x")


if __name__ == "__main__":
    sys.exit(main())
