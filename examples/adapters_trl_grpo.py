"""GRPO with TRL's GRPOTrainer on an mtrl_gym env, two ways (needs ``pip install "mtrl-gym[train,trl]"``).

    python examples/adapters_trl_grpo.py                       # rollout_func, the embedded SmolLM2
    python examples/adapters_trl_grpo.py --path factory        # environment_factory (tool calls)
    python examples/adapters_trl_grpo.py --env mtrl/SOP-KYBReview-v0 --max-steps 1

* ``--path rollout`` (default): ``RolloutFunc`` plays whole multi-turn episodes with TRL's
  generation through mtrl_gym's rollout engine; the reward is the env's outcome
  (``env_reward``) and env tokens are masked out of the loss (``env_mask``).
* ``--path factory``: ``environment_factory`` gives TRL one method per env tool; TRL parses
  the model's tool calls and calls them; ``get_reward()`` is the env's outcome. TRL needs
  a chat template that renders tools, so this path puts TRL's Qwen2.5 template on the
  tokenizer (SmolLM2's own template ignores tools).

A few CPU steps of a 135M model show the loop running, not learning; see
docs/training.md for a recipe that learns.
"""

from __future__ import annotations

import argparse
import tempfile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--path", choices=["rollout", "factory"], default="rollout")
    parser.add_argument("--env", default="mtrl/Wordle-v0", help="any registered env id")
    parser.add_argument("--max-steps", type=int, default=2)
    parser.add_argument("--max-turns", type=int, default=3, help="rollout path: assistant turns per episode")
    args = parser.parse_args()

    from trl import GRPOConfig, GRPOTrainer

    from mtrl_gym import models
    from mtrl_gym.adapters.trl import (
        RolloutFunc,
        env_reward,
        environment_dataset,
        environment_factory,
        rollout_dataset,
    )

    model, tokenizer = models.load()  # the embedded SmolLM2-135M-Instruct
    config = GRPOConfig(output_dir=tempfile.mkdtemp(prefix="mtrl-trl-"), use_cpu=True, per_device_train_batch_size=4,
                        num_generations=4, max_completion_length=48, max_steps=args.max_steps, learning_rate=1e-5,
                        logging_steps=1, report_to="none", save_strategy="no", temperature=1.0)
    if args.path == "rollout":
        trainer = GRPOTrainer(model=model, reward_funcs=env_reward, args=config, processing_class=tokenizer,
                              train_dataset=rollout_dataset(args.env, split="seeds:16"),
                              rollout_func=RolloutFunc(args.env, max_turns=args.max_turns))
    else:
        from trl.chat_template_utils import qwen2_5_chat_template

        tokenizer.chat_template = qwen2_5_chat_template
        trainer = GRPOTrainer(model=model, args=config, processing_class=tokenizer,
                              train_dataset=environment_dataset(args.env, split="seeds:16"),
                              environment_factory=environment_factory(args.env))
    trainer.train()
    for row in trainer.state.log_history:
        rewards = {k: round(v, 3) for k, v in row.items() if k.startswith("reward")}
        if rewards:
            print(f"step {row.get('step')}: {rewards}")


if __name__ == "__main__":
    main()
