"""``mtrl-gym serve``: an OpenAI-compatible policy endpoint with token-exact sessions.

Examples::

    # the embedded SmolLM2 on CPU, on port 8000
    mtrl-gym serve --model smollm2-135m --port 8000
    # a trained LoRA adapter on top of it, served as it was trained (format prefill, stop, max tokens)
    mtrl-gym serve --model smollm2-135m --adapter runs/grpo/checkpoints/step_000040/adapter
    # in front of an upstream vLLM server (its tokenizer renders the chat template here)
    mtrl-gym serve --model Qwen/Qwen2.5-0.5B-Instruct --sampler openai \\
        --sampler-kwargs '{"base_url": "http://127.0.0.1:8001"}'

An adapter written by ``mtrl-gym train`` (or the example recipes) is served with the format
prefill, stop strings, turn length and tool schemas of its training run (``--assistant-prefix``,
``--stop``, ``--max-new-tokens`` and ``--tool-schemas`` override them): every chat turn starts
with the prefill, so a model trained to continue ``<tool_call>{"name": "guess_word", ...``
answers with that call (native ``tool_calls`` when the request offers the tool), and a model
trained reading no tool schemas (``tools: false``) gets none in its prompt, whatever tools a
request offers (they are still parsed from its replies). ``POST /admin/reload`` swaps the
weights and keeps these settings (its response warns when the new adapter was trained with
others). What the model read, its system prompt and observation wrappers, is the client's to
send; the server prints what the training run used.

Every request needs the server's key as ``Authorization: Bearer <key>`` (the OpenAI
client's ``api_key``): ``--api-key``, else ``$MTRL_GYM_API_KEY``, else a random key printed
at start. Clients use ``http://HOST:PORT/v1`` (no recording) or a session's URL: create
one with ``curl -X POST -H "Authorization: Bearer $KEY" http://HOST:PORT/sessions`` and
point the OpenAI client at the ``base_url`` and ``api_key`` it returns (that key reaches
only its session); ``GET /sessions/<id>`` shows the recorded tokens, and
``POST /sessions/<id>/reward`` closes it with a reward. See docs/agents.md, "Security".
"""

from __future__ import annotations

import functools
import json
import os
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
    p.add_argument("--api-key", default=None, metavar="KEY", help="the key clients send as a Bearer token "
                   "(default: $MTRL_GYM_API_KEY, else a random key, printed at start); a key on the command line "
                   "shows in the process list, so prefer the variable")
    p.add_argument("--no-api-key", action="store_true", help="serve without any key (only on a loopback --host)")
    p.add_argument("--public-url", default=None, metavar="URL", help="the address clients reach the server at, "
                   "for the base_url of new sessions (default: http://HOST:PORT)")
    p.add_argument("--served-model-name", default=None, help="model id clients send (default: --model)")
    p.add_argument("--max-new-tokens", type=int, default=None, help="default max_tokens (default: the adapter's "
                   "training setting, else 256)")
    p.add_argument("--assistant-prefix", default=None, metavar="TEXT", help="text every chat turn starts with (a "
                   "format prefill; default: the adapter's training setting, else none; '' for none)")
    p.add_argument("--stop", action="append", default=None, metavar="TEXT", help="stop string added to every "
                   "chat request's (repeatable; none: no stop string; default: the adapter's training setting, else "
                   "none)")
    p.add_argument("--tool-schemas", choices=("on", "off"), default=None, help="off: a chat request's tools are "
                   "parsed from the replies but not shown in the prompt, for a model trained reading no tool schemas "
                   "(default: the adapter's training setting, else on)")
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


def adapter_serving(args, log=None) -> dict:
    """``{"max_new_tokens", "assistant_prefix", "stop", "tool_schemas"}``: the flags, else the
    adapter's training run's settings (``tool_schemas`` from its ``tools``), else the defaults.
    What the client must send (system prompt, observation wrappers) is reported through ``log``."""
    from mtrl_gym.cli.eval import stop_given
    from mtrl_gym.error import ConfigError

    log = log or (lambda text: print(text, file=sys.stderr, flush=True))
    given = {"max_new_tokens": args.max_new_tokens, "assistant_prefix": args.assistant_prefix,
             "stop": stop_given(args.stop),
             "tool_schemas": None if args.tool_schemas is None else args.tool_schemas == "on"}
    given = {k: v for k, v in given.items() if v is not None}
    out = {"max_new_tokens": 256, "assistant_prefix": "", "stop": (), "tool_schemas": True}
    if not args.adapter:
        return {**out, **given}
    from mtrl_gym.evaluation.serving import differences, training_serving

    try:
        found = training_serving(args.adapter)
    except ConfigError as e:
        missing = [f"--{k.replace('_', '-')}" for k in out if k not in given]
        if missing:
            raise ConfigError(f"{e} (here: {', '.join(missing)})") from None
        log(f"mtrl-gym serve: the training run's serving settings were not read ({e}); serving the flags'")
        return {**out, **given}
    if found is None:
        log(f"mtrl-gym serve: {args.adapter} has no training run beside it (config.yaml); serving without a "
            "format prefill or stop strings unless --assistant-prefix / --stop say otherwise")
        return {**out, **given}
    trained, path = found
    out = _served_as_trained(trained)
    text, wrappers = trained["system_prompt_text"], trained["wrappers"]
    prompt = "the env's" if text is None else "none" if text == "" else f"its own ({len(text)} characters)"
    schemas = "on" if out["tool_schemas"] else "off (a request's tools are parsed from the replies, not shown)"
    log(f"mtrl-gym serve: serving settings of {args.adapter} from its training run ({path}): format prefill "
        f"{out['assistant_prefix']!r}, stop {list(out['stop'])}, max tokens {out['max_new_tokens']}, tool schemas "
        f"{schemas}. It was trained reading: system prompt {prompt}, wrappers "
        f"{', '.join(w['name'] for w in wrappers) or 'none'}; clients send those themselves")
    for field, was, now in differences(out, given):
        log(f"mtrl-gym serve: --{field.replace('_', '-')} {_as_flag(field, now)!r} overrides the training run's "
            f"{_as_flag(field, was)!r}")
    return {**out, **given}


def unlike_training(config, adapter_path: str) -> list[str]:
    """How ``config``'s (a ServeConfig) prefill, stop strings, turn length and tool schemas
    differ from those the run that wrote ``adapter_path`` was trained with (empty: they agree,
    or no run is found beside it, as for the folders a trainer pushes to ``/admin/reload``)."""
    from mtrl_gym.error import ConfigError
    from mtrl_gym.evaluation.serving import differences, training_serving

    try:
        found = training_serving(adapter_path)
    except ConfigError as e:
        return [f"its training run's settings could not be read ({e})"]
    if found is None:
        return []
    trained = _served_as_trained(found[0])
    return [f"{k} {_as_flag(k, now)!r} (trained: {_as_flag(k, was)!r})"
            for k, was, now in differences(trained, {k: getattr(config, k) for k in trained})]


def _served_as_trained(trained: dict) -> dict:
    """The server's settings (ServeConfig fields) that serve a training run's ``trained``
    settings (:func:`mtrl_gym.evaluation.serving.training_serving`) as they were trained."""
    return {"max_new_tokens": trained["max_new_tokens"], "assistant_prefix": trained["assistant_prefix"],
            "stop": tuple(trained["stop"]), "tool_schemas": bool(trained["tools"])}


def _as_flag(field: str, value):
    """A setting as its flag writes it: ``stop`` a list, ``tool_schemas`` on/off."""
    if field == "stop":
        return list(value)
    if field == "tool_schemas":
        return "on" if value else "off"
    return value


def serve_config(args, log=None):
    """The :class:`~mtrl_gym.serve.service.ServeConfig` of the command line; refuses
    ``--no-api-key`` on a host other than loopback before any model loads."""
    from mtrl_gym.error import ConfigError
    from mtrl_gym.serve.app import is_loopback
    from mtrl_gym.serve.service import ServeConfig

    key = args.api_key if args.api_key is not None else os.environ.get("MTRL_GYM_API_KEY") or None
    if args.no_api_key and key is not None:
        raise ConfigError("--no-api-key and a key (--api-key or $MTRL_GYM_API_KEY) contradict each other; drop one")
    if args.no_api_key and not is_loopback(args.host):
        raise ConfigError(f"--no-api-key is refused with --host {args.host}: anyone who reaches the port could "
                          "sample, read sessions and reload weights. Drop --no-api-key (a key is drawn and printed) "
                          "or bind 127.0.0.1")
    return ServeConfig(model_name=args.served_model_name or args.model, **adapter_serving(args, log),
                       max_context_tokens=args.max_context_tokens, seed=args.seed, api_key=key,
                       require_api_key=not args.no_api_key)


def run(args) -> int:
    from mtrl_gym.serve.app import PolicyServer
    from mtrl_gym.serve.service import PolicyService

    config = serve_config(args)
    sampler, tokenizer = build_sampler(args)
    service = PolicyService(sampler, tokenizer, config)
    service.reload_warnings = functools.partial(unlike_training, config)
    server = PolicyServer(service, host=args.host, port=args.port, log_level="info", public_url=args.public_url)
    server.start()
    print(f"mtrl-gym serve: {config.model_name!r} at {server.public_url}/v1 (sessions: POST "
          f"{server.public_url}/sessions); Ctrl-C stops", file=sys.stderr, flush=True)
    if service.api_key is None:
        print("mtrl-gym serve: no API key (--no-api-key): every local process can use this server",
              file=sys.stderr, flush=True)
    elif config.api_key is None:
        print(f"mtrl-gym serve: API key (send it as 'Authorization: Bearer <key>'): {service.api_key}",
              file=sys.stderr, flush=True)
    try:
        server.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        sampler.close()
    return 0
