"""``mtrl-gym eval``: evaluate models and reference policies under serving settings.

Examples::

    # the embedded base model against the reference policies on the Wordle validation split
    mtrl-gym eval --model smollm2-135m --runs base:1.0 base:0.0 --policy solver --policy random

    # base vs trained under identical tasks and seeds, at serving and at greedy temperature
    mtrl-gym eval --model smollm2-135m --adapter runs/wordle/final \\
        --runs base:1.0 trained:1.0 trained:0.0 --n 8 --training-run runs/wordle

    # a served model, resumable after a crash
    mtrl-gym eval --endpoint http://127.0.0.1:8000 --model Qwen/Qwen2.5-0.5B-Instruct \\
        --runs endpoint:0.7 --out results/qwen --resume

A run is ``LABEL[:TEMPERATURE[:TOP_P]]``; labels: ``base`` (--model), ``trained``
(--adapter DIR, or NAME=DIR for more adapters), ``endpoint`` (--endpoint URL, or
NAME=URL), ``solver`` and ``random``.

An adapter written by ``mtrl-gym train`` is served as it was trained: system prompt, tool
schemas or not, format prefill, stop strings and tokens per turn come from its run's
``serving.yaml`` and ``config.yaml`` (:mod:`mtrl_gym.evaluation.serving`), and so do the
wrappers that change what the policy reads (``serving.wrappers``, such as ``WordleRecap``;
``--wrapper``); a flag that differs wins and is reported. An ``--out`` that holds an evaluation is refused unless ``--resume`` or
``--overwrite`` is given.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("eval", help="evaluate models and reference policies under serving settings",
                       description="Evaluate models (base, LoRA adapter, endpoint) and reference policies on the "
                                   "same tasks and seeds; report success, reward and pass@k with bootstrap "
                                   "intervals, trajectory metrics, plots and a markdown report.")
    p.add_argument("env_id", nargs="?", default="mtrl/Wordle-v0", help="environment id (default: %(default)s)")
    what = p.add_argument_group("what to evaluate")
    what.add_argument("--model", default=None, help="base model: embedded name (smollm2-135m), Hugging Face id or "
                      "folder; the 'base' label. For --endpoint runs, the served model's tokenizer")
    what.add_argument("--adapter", action="append", default=[], metavar="[NAME=]DIR",
                      help="LoRA adapter folder (peft format); label 'trained' unless NAME= is given (repeatable)")
    what.add_argument("--endpoint", action="append", default=[], metavar="[NAME=]URL",
                      help="OpenAI-compatible server; label 'endpoint' unless NAME= is given (repeatable)")
    what.add_argument("--endpoint-model", default=None, help="model name to request from the endpoint")
    what.add_argument("--runs", nargs="+", default=None, metavar="SPEC",
                      help="runs as LABEL[:TEMPERATURE[:TOP_P]], e.g. base:1.0 trained:1.0 trained:0.0 "
                           "(default: every given source at --temperature)")
    what.add_argument("--policy", action="append", default=[], metavar="NAME",
                      help="add a reference-policy row (repeatable): one of the env's policies "
                           "(Wordle: solver, random; SOP: solver, constant) or random for any env")
    what.add_argument("--opponent", action="append", default=[], metavar="POLICY",
                      help="multi-agent envs: the reference policy of the other seats, one match set each "
                           "(repeatable; default: the env's, e.g. solver and random for mtrl/WordleDuel-v0)")
    what.add_argument("--seat", default=None, help="multi-agent envs: the seat the runs play (default: the first)")
    tasks = p.add_argument_group("tasks")
    tasks.add_argument("--tasks", default=None, help="task file (JSONL/JSON/CSV/Parquet)")
    tasks.add_argument("--split", default=None, help="named split: train, val (Wordle, SOP domains), all "
                       "(Wordle) or seeds:N (default: val where the env has one)")
    tasks.add_argument("--limit", type=int, default=None, help="evaluate only the first N tasks")
    tasks.add_argument("--sop-bench", default=None, metavar="PATH", help="your checkout of the official SOP-Bench "
                       "data: evaluate on its --domain (evaluation only; see docs/sop.md)")
    tasks.add_argument("--domain", default=None, help="with --sop-bench: the domain folder to evaluate on")
    serve = p.add_argument_group("serving settings (every model run)")
    serve.add_argument("-n", "--n", type=int, default=8, help="samples per task (default: %(default)s)")
    serve.add_argument("--temperature", type=float, default=1.0, help="default temperature (default: %(default)s)")
    serve.add_argument("--top-p", type=float, default=1.0, help="default top_p (default: %(default)s)")
    serve.add_argument("--top-k", type=int, default=0, help="top-k filter, 0 = off (default: %(default)s)")
    serve.add_argument("--max-tokens", type=int, default=None,
                       help="max tokens per turn (default: the adapter's training setting, else 256)")
    serve.add_argument("--system-prompt", default=None, metavar="default|none|FILE",
                       help="the env's system prompt, none, or a file's text (default: the adapter's training "
                            "prompt, else default)")
    serve.add_argument("--tools", dest="tools", action=argparse.BooleanOptionalAction, default=None,
                       help="tool schemas in the system message; --no-tools as trained by the cpu preset "
                            "(default: the adapter's training setting, else on)")
    serve.add_argument("--assistant-prefix", default=None, metavar="TEXT",
                       help="text every assistant turn starts with (a format prefill; default: the adapter's "
                            "training setting, else none)")
    serve.add_argument("--stop", action="append", default=None, metavar="TEXT",
                       help="stop string of every turn (repeatable; the completing token is kept; none: no "
                            "stop string; default: the adapter's training setting, else none)")
    serve.add_argument("--wrapper", dest="wrappers", action="append", default=None, metavar="SPEC",
                       help="a wrapper that changes only what the policy reads, by name or as "
                            '{"name": ..., "kwargs": {...}} (repeatable), e.g. WordleRecap; none: no wrapper '
                            "(default: the adapter's training setting, else none)")
    serve.add_argument("--constrained", action="store_true",
                       help="dictionary decoding: each turn must be a word of the env's action vocabulary followed "
                            "by the first --stop string (a policy of its own; runs are named LABEL:T:constrained)")
    serve.add_argument("--max-turns", type=int, default=None, help="most turns per episode (default: the env's)")
    serve.add_argument("--max-episode-tokens", type=int, default=4096, help="token budget per episode")
    serve.add_argument("--seed", type=int, default=0, help="task i resets with seed + i (default: %(default)s)")
    serve.add_argument("--batch-tasks", type=int, default=8, help="tasks per rollout batch, saved after each "
                       "(default: %(default)s)")
    out = p.add_argument_group("output")
    out.add_argument("--out", default=None, help="output folder (default: mtrl-eval/<timestamp>)")
    out.add_argument("--resume", action="store_true", help="continue the evaluation in --out")
    out.add_argument("--overwrite", action="store_true", help="replace the evaluation already in --out")
    out.add_argument("--retry-failed", action="store_true", help="with --resume, replay failed episodes too")
    out.add_argument("--training-run", default=None, help="training run (folder, metrics JSONL or mlflow:<run_id>) "
                     "for training curves and the reward-hacking check (default: the run folder of a single "
                     "--adapter, when it is inside one)")
    out.add_argument("--reference", default=None, help="run the others are compared to (default: the first model run)")
    out.add_argument("--mlflow", action=argparse.BooleanOptionalAction, default=None,
                     help="log to MLflow (default: on when mlflow is installed)")
    out.add_argument("--tracking-uri", default=None, help="MLflow store (default: as for training)")
    out.add_argument("--experiment", default="mtrl-gym-eval", help="MLflow experiment (default: %(default)s)")
    out.add_argument("--examples", type=int, default=2, help="trajectories per run in the report")
    out.add_argument("--save-tokens", action="store_true", help="keep token ids and log-probs in the JSONL")
    out.add_argument("--quiet", action="store_true", help="no progress bars")
    hw = p.add_argument_group("hardware")
    hw.add_argument("--backend", choices=["hf", "vllm"], default="hf",
                    help="model runs with transformers (hf) or an in-process vLLM engine (default: %(default)s)")
    hw.add_argument("--gpu-memory-utilization", type=float, default=0.85,
                    help="vLLM: fraction of GPU memory the engine may use (default: %(default)s)")
    hw.add_argument("--device", default=None, help="cpu, cuda, cuda:1 (default: cuda when available)")
    hw.add_argument("--dtype", default=None, help="model dtype, e.g. bfloat16 (default: the checkpoint's)")
    hw.add_argument("--max-batch-size", type=int, default=None, help="most sequences per forward pass")
    hw.add_argument("--allow-base-mismatch", action="store_true",
                    help="accept an adapter whose recorded base model has another name (shapes are still checked)")
    p.set_defaults(func=run)


def _named(values: list[str], default: str, key: str) -> dict[str, dict[str, str]]:
    from mtrl_gym.error import ConfigError

    out: dict[str, dict[str, str]] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if sep and name.isidentifier() and "://" not in name:
            label, target = name, rest
        else:
            label, target = default, value
        if label in out:
            raise ConfigError(f"label {label!r} is given twice; name them, e.g. --{key.replace('_', '-')} "
                              f"{label}2=...")
        out[label] = {key: target}
    return out


#: RunSpec serving fields when neither a flag nor an adapter's training run sets them.
_SERVING_DEFAULTS = {"max_new_tokens": 256, "system_prompt": "default", "tools": True, "assistant_prefix": "",
                     "stop": (), "wrappers": []}
#: RunSpec field -> command-line flag (for messages).
_FLAGS = {"max_new_tokens": "--max-tokens", "system_prompt": "--system-prompt", "tools": "--tools/--no-tools",
          "assistant_prefix": "--assistant-prefix", "stop": "--stop", "wrappers": "--wrapper"}


def _given_serving(args) -> dict:
    """The serving settings given as flags (the others stay unset)."""
    given = {"max_new_tokens": args.max_tokens, "system_prompt": args.system_prompt, "tools": args.tools,
             "assistant_prefix": args.assistant_prefix, "stop": stop_given(args.stop),
             "wrappers": _wrappers_given(getattr(args, "wrappers", None))}
    return {k: v for k, v in given.items() if v is not None}


def _none_given(values: list[str], flag: str, what: str) -> bool:
    """Whether repeatable ``flag``'s ``values`` are ``none`` (nothing); refuses ``none`` beside others."""
    from mtrl_gym.error import ConfigError

    nones = [v.strip().lower() == "none" for v in values]
    if any(nones) and not all(nones):
        raise ConfigError(f"{flag} none means no {what}; it cannot be given with other {flag} values")
    return any(nones)


def stop_given(values: list[str] | None) -> tuple[str, ...] | None:
    """``--stop`` values as a tuple (``none``: no stop strings; not given: None)."""
    if values is None:
        return None
    if _none_given(values, "--stop", "stop string"):
        return ()
    if not all(values):
        from mtrl_gym.error import ConfigError

        raise ConfigError(f"--stop needs a non-empty string (none: no stop string), got {values!r}")
    return tuple(values)


def _wrappers_given(values: list[str] | None) -> list[dict] | None:
    """``--wrapper`` values as checked specs (``none``: an empty list; not given: None)."""
    if values is None:
        return None
    from mtrl_gym.rollout.serving import view_wrapper_spec
    from mtrl_gym.rollout.sources.local import wrapper_arg

    if _none_given(values, "--wrapper", "wrapper"):
        return []
    return [view_wrapper_spec(wrapper_arg(v), where="--wrapper") for v in values]


def _inherited(adapter: str, out_dir: str | None, log, given: dict) -> dict | None:
    """The serving settings of the run that trained ``adapter`` as RunSpec fields, or None.

    A system prompt text is saved under ``out_dir`` (default: the temporary folder). Settings
    that cannot be read are an error, unless ``given`` (the flags) sets every one of them."""
    import tempfile

    from mtrl_gym.error import ConfigError
    from mtrl_gym.evaluation.serving import system_prompt_file, training_serving

    try:
        found = training_serving(adapter)
    except ConfigError as e:
        missing = [_FLAGS[k] for k in _SERVING_DEFAULTS if k not in given]
        if missing:
            raise ConfigError(f"{e} (here: {', '.join(missing)})") from None
        log(f"the serving settings of {adapter}'s training run were not read ({e}); every one is given as a flag")
        return None
    if found is None:
        return None
    settings, path = found
    text = settings.pop("system_prompt_text")
    if text is None:
        settings["system_prompt"] = "default"
    elif text == "":
        settings["system_prompt"] = "none"
    else:
        settings["system_prompt"] = system_prompt_file(text, out_dir or Path(tempfile.gettempdir()) / "mtrl_gym")
    prompt = "the env's" if text is None else ("none" if text == "" else f"the run's own ({len(text)} characters)")
    log(f"serving settings of {adapter} from its training run ({path}): max tokens {settings.get('max_new_tokens')}, "
        f"system prompt {prompt}, tool schemas {'on' if settings['tools'] else 'off'}, format prefill "
        f"{settings['assistant_prefix']!r}, stop {list(settings['stop'])}, wrappers "
        f"{_describe('wrappers', settings['wrappers'])}")
    return settings


def _describe(field: str, value, *, trained: bool = False) -> str:
    if trained and field == "system_prompt" and value not in ("default", "none"):
        return "its own system prompt text"
    if field == "wrappers":
        return ", ".join(w["name"] + (f"({w['kwargs']})" if w["kwargs"] else "") for w in value) or "none"
    return repr(list(value)) if field == "stop" else repr(value)


def build_runs(args, out_dir: str | None = None, log=None):
    """The run specs of the command line (see the module docstring for the grammar).

    Serving settings: an adapter's come from its training run's serving.yaml / config.yaml (its system
    prompt text is saved under ``out_dir``), then the flags; the base and
    endpoint runs get the adapters' settings when every adapter was trained with the same,
    so that base and trained are served alike. Every flag that overrides a training
    setting is reported through ``log``.
    """
    from mtrl_gym.error import ConfigError
    from mtrl_gym.evaluation import parse_run
    from mtrl_gym.evaluation.serving import differences

    log = log or (lambda text: print(text, file=sys.stderr))
    given = _given_serving(args)
    sources: dict[str, dict] = {}
    if args.model:
        sources["base"] = {"model": args.model}
    trained: dict[str, dict] = {}
    for label, src in _named(args.adapter, "trained", "adapter").items():
        sources[label] = {**src, **({"model": args.model} if args.model else {})}
        inherited = _inherited(src["adapter"], out_dir, log, given)
        if inherited is not None:
            trained[label] = inherited
            for field, was, now in differences(inherited, given):
                log(f"{_FLAGS[field]} {_describe(field, now)} overrides how {label} was trained "
                    f"({_describe(field, was, trained=True)})")
            sources[label].update({k: v for k, v in inherited.items() if k not in given})
    for label, src in _named(args.endpoint, "endpoint", "endpoint").items():
        sources[label] = {**src, "endpoint_model": args.endpoint_model, "model": args.model}
    shared = list(trained.values())
    if shared and all(t == shared[0] for t in shared) and len(shared) == len(args.adapter):
        for label in sources:
            if label not in trained:
                sources[label].update({k: v for k, v in shared[0].items() if k not in given})
    # By default every source runs once; with --endpoint, --model names its tokenizer, not a run.
    tokens = list(args.runs) if args.runs else [label for label in sources
                                                  if label != "base" or not args.endpoint]
    tokens += [p for p in args.policy if p not in tokens]
    for p in args.policy:  # any reference policy of the env's profile (make_policy names the known ones)
        sources.setdefault(p.split(":")[0], {"policy": p.split(":")[0]})
    if not tokens:
        raise ConfigError("nothing to evaluate: give --model, --adapter, --endpoint or --policy (and --runs)")
    defaults = {"temperature": args.temperature, "top_p": args.top_p, "top_k": args.top_k,
                **_SERVING_DEFAULTS, **given, "constrained": bool(getattr(args, "constrained", False))}
    return [parse_run(t, sources, defaults=defaults) for t in tokens]


def run(args) -> int:
    from mtrl_gym.error import ConfigError
    from mtrl_gym.evaluation import EvalConfig, ModelPool, default_out_dir, evaluate, text_table

    if args.resume and not args.out:
        raise ConfigError("--resume needs --out DIR (the folder of the evaluation to continue)")
    env_kwargs: dict = {}
    if args.sop_bench:  # the official data, evaluation only: its rows are the tasks
        if not args.domain:
            raise ConfigError("--sop-bench needs --domain NAME (a domain folder of the checkout)")
        from mtrl_gym.envs.external import external_benchmark

        args.env_id, args.tasks, env_kwargs = external_benchmark("sop-bench").setup(args.sop_bench, args.domain)
    split = args.split
    if split is None and args.tasks is None:
        from mtrl_gym.evaluation.tasks import split_names

        if "val" not in split_names(args.env_id):
            raise ConfigError(f"give --tasks FILE or --split (e.g. seeds:100) for {args.env_id}")
        split = "val"
    mlflow = args.mlflow
    if mlflow is None:
        import importlib.util

        mlflow = importlib.util.find_spec("mlflow") is not None
    config = EvalConfig(n=args.n, seed=args.seed, max_turns=args.max_turns, max_episode_tokens=args.max_episode_tokens,
                        batch_tasks=args.batch_tasks, report_examples=args.examples, save_tokens=args.save_tokens,
                        reference_run=args.reference, progress=not args.quiet, env_kwargs=env_kwargs)
    pool = ModelPool(backend=args.backend, device=args.device, dtype=args.dtype, max_batch_size=args.max_batch_size,
                     allow_base_mismatch=args.allow_base_mismatch,
                     vllm_kwargs={"max_model_len": args.max_episode_tokens,
                                  "gpu_memory_utilization": args.gpu_memory_utilization})
    training_run = args.training_run
    if training_run is None and len(args.adapter) == 1:
        from mtrl_gym.evaluation.training import training_run_of

        found = training_run_of(next(iter(_named(args.adapter, "trained", "adapter").values()))["adapter"])
        if found is not None:
            training_run = str(found)
            print(f"training run: {found} (the adapter's run folder; --training-run overrides)", file=sys.stderr)
    out_dir = args.out or str(default_out_dir())
    from mtrl_gym.registry import is_multiagent
    from mtrl_gym.run_folder import EVAL_ARTEFACTS, EVAL_MARKERS, claim_output_dir

    claim_output_dir(out_dir, markers=EVAL_MARKERS, artefacts=EVAL_ARTEFACTS, resume=args.resume,
                     overwrite=args.overwrite, flag="--out")
    if is_multiagent(args.env_id):
        return _run_matches(args, config, pool, split, out_dir, mlflow)
    runs = build_runs(args, out_dir)
    try:
        result = evaluate(args.env_id, runs, tasks=args.tasks, split=split, limit=args.limit,
                          config=config, out_dir=out_dir, resume=args.resume, retry_failed=args.retry_failed,
                          training_run=training_run, pool=pool, mlflow=mlflow, tracking_uri=args.tracking_uri,
                          experiment=args.experiment)
    except KeyboardInterrupt:
        print(f"mtrl-gym eval: finished episodes are saved in {out_dir}; continue with the same command plus "
              f"--out {out_dir} --resume", file=sys.stderr)
        raise
    print(text_table(result.summary))
    if args.sop_bench:
        from mtrl_gym.envs.external import external_benchmark

        print(external_benchmark("sop-bench").official_report(result.files))
    for flag in result.summary.get("flags", []):
        print(f"WARNING ({flag['run']}): {flag['message']}", file=sys.stderr)
    print(f"\nsummary: {result.files['summary']}")
    if "report" in result.files:
        print(f"report:  {result.files['report']}")
    return 0


def _run_matches(args, config, pool, split, out_dir, mlflow) -> int:
    """A multi-agent env: the runs play one seat against each opponent (win/draw/loss with intervals)."""
    from mtrl_gym.evaluation.matches import evaluate_matches, match_table

    result = evaluate_matches(args.env_id, build_runs(args), opponents=args.opponent or None, seat=args.seat,
                              tasks=args.tasks, split=split, limit=args.limit, config=config, out_dir=out_dir,
                              resume=args.resume, retry_failed=args.retry_failed, pool=pool, mlflow=mlflow,
                              tracking_uri=args.tracking_uri, experiment=args.experiment)
    print(match_table(result.matches))
    print(f"\nmatches: {result.out_dir / 'matches.json'} (one full evaluation per opponent in vs-<opponent>/)")
    return 0
