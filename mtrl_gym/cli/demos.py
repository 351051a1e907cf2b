"""``mtrl-gym demos``: expert demonstrations from a reference policy, as trajectory JSONL.

Thin over :func:`mtrl_gym.trainers.demos.make_demos`. ``--config PRESET`` takes the env, the
serving wrappers (the preset's first wrapper, its system prompt), format prefill and stop
strings of a GRPO preset, so the demonstrations are in the format the model is trained and
evaluated in. The val split is refused.

``--learner RECORDS`` makes them from a model's own games instead
(:func:`~mtrl_gym.trainers.demos.learner_demos`): the episode records of ``mtrl-gym eval``
on *training* tasks (a record of any other task is refused). ``--relabel`` is DAgger: the
reference policy labels every board the model reached; without it, the model's solved games
are copied whole (expert iteration: evaluate with ``--constrained`` to copy a dictionary-decoded
policy's wins into the plain model); ``--all-games`` copies every game whole, solved or not (a
dictionary-decoded policy's games for ``mtrl-gym sft --distill``).
"""

from __future__ import annotations

import json
import os


def register(sub) -> None:
    p = sub.add_parser("demos", help="write expert demonstrations (reference-policy episodes) as JSONL",
                       description="Play a reference policy through the rollout engine and save token-exact "
                                   "demonstrations for supervised fine-tuning.")
    p.add_argument("--config", default=None, help="GRPO preset or config file to take the format from (e.g. cpu-sft)")
    p.add_argument("--env", default=None, help="environment id (default: the config's, else mtrl/Wordle-v0)")
    p.add_argument("--policy", default="teacher", choices=["teacher", "solver"], help="reference policy")
    p.add_argument("--policy-kwargs", default="{}", help='policy options as JSON, e.g. \'{"choice": "random"}\'')
    p.add_argument("-n", "--num-episodes", type=int, default=600, help="demonstrations (default: 600)")
    p.add_argument("--split", default="train", help="task split; only 'train' (evaluation tasks stay unseen)")
    p.add_argument("--max-turns", type=int, default=None, help="most turns per demonstration")
    p.add_argument("--wrapper", dest="wrappers", action="append", default=[], metavar="SPEC",
                   help='a wrapper after the config\'s system prompt: a name, or {"name": ..., "kwargs": {...}} '
                        '(repeatable; one that changes only the text the model reads, such as WordleRecap, goes '
                        'to the serving wrappers, outside the others), e.g. \'{"name": "PriorGuesses", "kwargs": {"num_priors": [1, 4], '
                        '"policy": "random"}}\' for single-board examples')
    p.add_argument("--learner", default=None, metavar="RECORDS",
                   help="a model's evaluation records (trajectories/<run>.jsonl of `mtrl-gym eval` on training "
                        "tasks): make the demonstrations from its games (-n and --max-turns are then unused)")
    p.add_argument("--relabel", action="store_true",
                   help="with --learner: DAgger, the reference policy labels every board the model reached "
                        "(default: copy the model's solved games whole)")
    p.add_argument("--all-games", action="store_true",
                   help="with --learner: copy every game whole, solved or not (a dictionary-decoded policy's games, "
                        "for `mtrl-gym sft --distill`)")
    p.add_argument("--seed", type=int, default=0, help="base reset seed (episode i resets with seed + i; default 0)")
    p.add_argument("--out", required=True, help="output JSONL file")
    p.set_defaults(func=run)


def run(args) -> int:
    from mtrl_gym.error import ConfigError
    from mtrl_gym.trainers.demos import DemoConfig, make_demos, write_demos

    try:
        policy_kwargs = json.loads(args.policy_kwargs)
    except json.JSONDecodeError as e:
        raise ConfigError(f"--policy-kwargs must be a JSON object, got {args.policy_kwargs!r} ({e.msg})") from None
    from mtrl_gym.rollout.sources.local import wrapper_arg

    wrappers = [wrapper_arg(text) for text in args.wrappers]
    values = {}
    if args.config:
        from mtrl_gym.trainers.grpo.config import GRPOConfig

        c = GRPOConfig.load(args.config)
        values = dict(env=c.env, env_kwargs=dict(c.env_kwargs), env_wrappers=c.env_wrappers[:1], model=c.model,
                      serving=c.serving.to_dict(), max_episode_tokens=c.episode.max_tokens,
                      train_size=c.train_size, val_size=c.val_size, split_seed=c.split_seed)
    if args.env:
        values["env"] = args.env
    from mtrl_gym.rollout.serving import observation_wrappers

    views = observation_wrappers(wrappers)  # what the model reads (WordleRecap): serving wrappers, saved for SFT
    values["env_wrappers"] = [*values.get("env_wrappers", []), *(w for w in wrappers if w not in views)]
    if views:
        serving = values.setdefault("serving", {})
        serving["wrappers"] = [*serving.get("wrappers", []), *views]
    config = DemoConfig(**values, policy=args.policy, policy_kwargs=policy_kwargs, num_episodes=args.num_episodes,
                        split=args.split, max_turns=args.max_turns, seed=args.seed)
    if (args.relabel or args.all_games) and not args.learner:
        raise ConfigError("--relabel and --all-games take a model's games: give them with --learner RECORDS")
    if args.relabel and args.all_games:
        raise ConfigError("--relabel labels every board of every game already; --all-games copies the games: give one")
    trajectories = make_demos(config) if not args.learner else \
        learner_games(config, args.learner, args.relabel, every=args.all_games)
    path = write_demos(trajectories, args.out, config)
    solved = sum(bool(t.metrics.get("success")) for t in trajectories)
    print(f"wrote {len(trajectories)} demonstrations to {path} ({solved} solved, "
          f"{sum(t.trainable_tokens for t in trajectories)} assistant tokens)")
    return 0


def learner_games(config, path: str, relabel: bool, *, every: bool = False):
    """:func:`~mtrl_gym.trainers.demos.learner_demos` of the evaluation records in ``path``,
    each matched to its training task by ``task_id``; a record of another task is refused.
    Without ``relabel``, the solved games only, or ``every`` game."""
    from mtrl_gym.error import ConfigError
    from mtrl_gym.evaluation import read_records
    from mtrl_gym.trainers.demos import learner_demos, recorded_actions, train_tasks

    if not os.path.isfile(path):
        raise ConfigError(f"--learner {path!r} does not exist (give `mtrl-gym eval`'s <out>/trajectories/<run>.jsonl)")
    records = read_records(path)
    if not records:
        raise ConfigError(f"--learner {path!r} holds no evaluation records (give `mtrl-gym eval`'s "
                          "<out>/trajectories/<run>.jsonl)")
    rows = {str(row.get("id")): row for row in train_tasks(config) or []}
    games = []
    for record in records:
        row = rows.get(str(record.get("task_id")))
        if row is None:
            raise ConfigError(f"--learner record of task {record.get('task_id')!r} is not a training task of "
                              f"{config.env} (split_seed {config.split_seed}): a model's games on evaluation "
                              "tasks must not become training data")
        if not relabel and not every and not record.get("success"):
            continue
        games.append((row, recorded_actions(record)))
    return learner_demos(config, games, relabel=relabel)
