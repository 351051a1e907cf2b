"""``mtrl-gym export``: a trained adapter as a shareable folder, optionally pushed to the Hub.

::

    mtrl-gym export runs/wordle --out exports/wordle               # peft files + README.md model card
    mtrl-gym export runs/wordle --out exports/wordle --eval runs/wordle/eval --license apache-2.0
    mtrl-gym export runs/wordle --out exports/wordle --push me/smollm2-wordle-grpo

The folder holds the latest checkpoint's adapter (peft layout), the model card, the run's
config, the held-out evaluation's summary and the envs' data notices
(:mod:`mtrl_gym.evaluation.model_card`). ``--push REPO`` uploads it with ``huggingface_hub``
(a token from ``HF_TOKEN`` or ``huggingface-cli login``); without a token or a network it
stops with one line saying so, and the exported folder stays where it is.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mtrl_gym.error import ConfigError, DependencyNotInstalled


def register(sub) -> None:
    p = sub.add_parser("export", help="write a trained adapter with its model card (and push it to the Hub)",
                       description="Export the latest adapter of a training run folder in peft's layout with a "
                                   "Hugging Face model card (README.md).")
    p.add_argument("run_dir", metavar="RUN_DIR", help="the run folder of `mtrl-gym train` (its --output-dir)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write (must be new or empty)")
    p.add_argument("--eval", dest="eval_dir", default=None, metavar="DIR",
                   help="an `mtrl-gym eval --out` folder: its summary.json is the card's held-out table "
                        "(default: the newest evaluation folder inside RUN_DIR, if any)")
    p.add_argument("--name", default=None, help="the model's name on the card (default: REPO or the run folder's name)")
    p.add_argument("--license", default=None, metavar="SPDX", help="the adapter's licence for the card, e.g. apache-2.0")
    p.add_argument("--push", default=None, metavar="REPO", help="also upload to the Hugging Face Hub repo REPO")
    p.add_argument("--private", action="store_true", help="with --push: create the repo private")
    p.set_defaults(func=run)


def _validation(run_dir: Path) -> list[str]:
    from mtrl_gym.trainers.grpo.tracking import format_held_out

    path = run_dir / "summary.json"
    if not path.is_file():
        return []
    try:
        return format_held_out(json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, TypeError, KeyError, ValueError):
        return []


def push(folder: Path, repo: str, *, private: bool = False) -> str:
    """Upload ``folder`` to the Hub repo ``repo``; returns its URL. One-line errors when it cannot."""
    try:
        import huggingface_hub
    except ImportError:
        raise DependencyNotInstalled("huggingface_hub", extra="train") from None
    token = huggingface_hub.get_token()
    if not token:
        raise ConfigError(f"cannot push to {repo}: no Hugging Face token (set HF_TOKEN or run `huggingface-cli "
                          f"login`); the export is in {folder}")
    api = huggingface_hub.HfApi(token=token)
    try:
        api.create_repo(repo, private=private, exist_ok=True)
        info = api.upload_folder(folder_path=str(folder), repo_id=repo, commit_message="mtrl-gym export")
    except Exception as e:  # noqa: BLE001 - offline, refused, unauthorised: one line, not a traceback
        reason = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise ConfigError(f"cannot push to {repo}: {type(e).__name__}: {reason}; the export is in {folder}") from None
    return str(getattr(info, "commit_url", "") or f"https://huggingface.co/{repo}")


def run(args) -> int:
    from mtrl_gym.evaluation.model_card import export_run

    run_dir = Path(args.run_dir)
    out = export_run(run_dir, args.out, eval_dir=args.eval_dir, name=args.name or args.push,
                     license=args.license, validation=_validation(run_dir))
    print(f"exported {out} (README.md, {', '.join(sorted(p.name for p in out.iterdir() if p.is_file()))})",
          file=sys.stderr)
    if args.push:
        print(f"pushed to {push(out, args.push, private=args.private)}", file=sys.stderr)
    return 0
