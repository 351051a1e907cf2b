"""``mtrl-gym serve``: an OpenAI-compatible policy endpoint with token-exact sessions.

Examples::

    # the embedded SmolLM2 on CPU, on port 8000
    mtrl-gym serve --model smollm2-135m --port 8000
    # a trained LoRA adapter on top of it
    mtrl-gym serve --model smollm2-135m --adapter runs/grpo/checkpoints/step_000040/adapter
    # in front of an upstream vLLM server (its tokenizer renders the chat template here)
    mtrl-gym serve --model Qwen/Qwen2.5-0.5B-Instruct --sampler openai \\
        --sampler-kwargs '{"base_url": "http://127.0.0.1:8001"}'

Clients use ``http://HOST:PORT/v1`` (no recording) or a session's URL: create one with
``curl -X POST http://HOST:PORT/sessions`` and point the OpenAI client at the
``base_url`` it returns; ``GET /sessions/<id>`` shows the recorded tokens, and
``POST /sessions/<id>/reward`` closes it with a reward. See docs/agents.md.
"""

from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser("serve", help="serve a policy over an OpenAI-compatible HTTP API, recording sessions",
                       description="OpenAI-compatible /v1/chat/completions and /v1/completions over a sampler, "
                                   "with token-exact session capture under /sessions/<id>/v1.")
    p.add_argument("--model", default="smollm2-135m", help="embedded name, Hugging Face id or folder (with "
                   "--sampler openai: its tokenizer) (default: %(default)s)")
    p.add_argument("--adapter", default=None, metavar="PATH", help="a LoRA adapter folder to apply (hf sampler)")
    p.add_argument("--sampler", default="hf", choices=("hf", "vllm", "openai"), help="(default: %(default)s)")
    p.add_argument("--sampler-kwargs", default="{}", metavar="JSON",
                   help='extra sampler arguments, e.g. \'{"base_url": "http://127.0.0.1:8001"}\' for openai')
    p.add_argument("--host", default="127.0.0.1", help="(default: %(default)s)")
    p.add_argument("--port", type=int, default=8000, help="0 picks a free port (default: %(default)s)")
    p.add_argument("--served-model-name", default=None, help="model id clients send (default: --model)")
    p.add_argument("--max-new-tokens", type=int, default=256, help="default max_tokens (default: %(default)s)")
    p.add_argument("--max-context-tokens", type=int, default=None, help="context limit of a session "
                   "(default: the model's)")
    p.add_argument("--seed", type=int, default=0, help="base of the seeds of requests without one")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: cuda when available)")
    p.add_argument("--dtype", default=None, help="model dtype, e.g. bfloat16 (default: the checkpoint's)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    p.set_defaults(func=run)


def build_sampler(args):
    """``(sampler, tokenizer)`` the command line asks for."""
    from mtrl_gym import models
    from mtrl_gym.error import ConfigError
    from mtrl_gym.rollout.samplers import make_sampler

    try:
        kwargs = json.loads(args.sampler_kwargs)
    except json.JSONDecodeError as e:
        raise ConfigError(f"--sampler-kwargs must be a JSON object, got {args.sampler_kwargs!r} ({e})") from None
    if not isinstance(kwargs, dict):
        raise ConfigError(f"--sampler-kwargs must be a JSON object, got {args.sampler_kwargs!r}")
    if args.adapter and args.sampler != "hf":
        raise ConfigError("--adapter works with --sampler hf (load adapters into vLLM with its own options)")
    if args.sampler == "hf":
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        model, tokenizer = models.load(args.model, dtype=args.dtype, device=args.device)
        if args.adapter:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, args.adapter).eval()
        return make_sampler("hf", policy=model, tokenizer=tokenizer, seed=args.seed, **kwargs), tokenizer
    tokenizer = models.load_tokenizer(args.model)
    return make_sampler(args.sampler, tokenizer=tokenizer, model_name=args.model, seed=args.seed, **kwargs), tokenizer


def run(args) -> int:
    from mtrl_gym.serve.app import PolicyServer
    from mtrl_gym.serve.service import PolicyService, ServeConfig

    sampler, tokenizer = build_sampler(args)
    config = ServeConfig(model_name=args.served_model_name or args.model, max_new_tokens=args.max_new_tokens,
                         max_context_tokens=args.max_context_tokens, seed=args.seed)
    server = PolicyServer(PolicyService(sampler, tokenizer, config), host=args.host, port=args.port,
                          log_level="info")
    server.start()
    print(f"mtrl-gym serve: {config.model_name!r} at {server.url}/v1 (sessions: POST {server.url}/sessions); "
          "Ctrl-C stops", file=sys.stderr, flush=True)
    try:
        server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        sampler.close()
    return 0
