"""Base against trained on the same task and seed, turn by turn, for the evaluation report.

Every run of an evaluation plays the same tasks with the same reset seeds, so episode
``(task_index, sample_index)`` of a base model and of its trained adapter started from the
same state. :func:`run_pairs` matches each adapter run with its base-model run (the one at
the same temperature, else the first), :func:`pick_pairs` chooses the episodes worth
reading (outcomes that differ first), and :func:`render_pair` puts the two side by side in
one markdown table: per turn, each run's reply and the env's answer.

>>> summary = {"runs": {"base:1.0": {"spec": {"kind": "model", "temperature": 1.0}},
...                     "trained:1.0": {"spec": {"kind": "adapter", "temperature": 1.0}},
...                     "solver": {"spec": {"kind": "policy"}}}}
>>> run_pairs(summary)
[('base:1.0', 'trained:1.0')]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["run_pairs", "pick_pairs", "render_pair", "pairs_section"]

#: Characters of one table cell (a reply or an env answer); the rest is cut with a note.
CELL_CHARS = 400


def run_pairs(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(base run, trained run)`` for every adapter run that has a base-model run to face."""
    runs = summary.get("runs") or {}
    bases = [n for n, s in runs.items() if s["spec"].get("kind") == "model"]
    out = []
    for name, s in runs.items():
        if s["spec"].get("kind") != "adapter" or not bases:
            continue
        same = [b for b in bases if runs[b]["spec"].get("temperature") == s["spec"].get("temperature")]
        out.append(((same or bases)[0], name))
    return out


def pick_pairs(base: Sequence[Mapping[str, Any]], trained: Sequence[Mapping[str, Any]],
               count: int) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """Up to ``count`` episode pairs with the same task and sample: the trained run's wins
    over the base first, then its losses, then the rest, each in task order."""
    by_key = {(r["task_index"], r["sample_index"]): r for r in base}
    both = [(by_key[k], t) for t in trained if (k := (t["task_index"], t["sample_index"])) in by_key]

    def rank(pair):
        b, t = pair
        return (0 if t["success"] and not b["success"] else 1 if b["success"] and not t["success"] else 2,
                t["task_index"], t["sample_index"])

    return sorted(both, key=rank)[:max(count, 0)]


def _cell(text: str) -> str:
    text = text if len(text) <= CELL_CHARS else text[:CELL_CHARS] + f" [... {len(text) - CELL_CHARS} more characters]"
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`").replace("<", "&lt;")
    return "<br>".join(line for line in text.splitlines()) or " "


def _turns(record: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(reply, env answer)`` per assistant turn of an episode record."""
    out: list[tuple[str, list[str]]] = []
    for m in record.get("messages") or []:
        if m.get("role") == "assistant":
            out.append((str(m.get("content", "")), []))
        elif out:
            out[-1][1].append(str(m.get("content", "")))
    return [(reply, "\n".join(env)) for reply, env in out]


def _outcome(r: Mapping[str, Any]) -> str:
    what = "success" if r.get("success") else ("failed" if r.get("failed") else "no success")
    return f"{what}, reward {float(r['outcome_reward']):+.3f}, {len(_turns(r))} turns"


def render_pair(base_name: str, base: Mapping[str, Any], trained_name: str, trained: Mapping[str, Any]) -> str:
    """One task played by both runs: a heading with both outcomes and a turn-by-turn table."""
    head = (f"#### task {trained.get('task_id')} (#{trained['task_index']}), seed {trained.get('seed')}, "
            f"sample {trained['sample_index']}\n\n`{base_name}`: {_outcome(base)}; "
            f"`{trained_name}`: {_outcome(trained)}")
    a, b = _turns(base), _turns(trained)
    lines = [head, "", f"| turn | `{base_name}` reply | env | `{trained_name}` reply | env |", "|---|---|---|---|---|"]
    for i in range(max(len(a), len(b))):
        left = a[i] if i < len(a) else ("", "")
        right = b[i] if i < len(b) else ("", "")
        lines.append(f"| {i + 1} | " + " | ".join(_cell(x) for x in (*left, *right)) + " |")
    for name, r in ((base_name, base), (trained_name, trained)):
        if r.get("failed"):
            lines.append(f"\n`{name}` failed: {_cell(str(r.get('failure_reason')))}")
    return "\n".join(lines)


def pairs_section(summary: Mapping[str, Any], records: Mapping[str, Sequence[Mapping[str, Any]]],
                  count: int) -> list[str]:
    """The report's "Base vs trained" section as markdown lines; empty without a pair of runs."""
    pairs = run_pairs(summary)
    if not pairs or count <= 0:
        return []
    lines = ["", "## Base vs trained, same task", "",
             "The same task and reset seed played by the base model and by the trained adapter, turn by "
             "turn (episodes where the outcomes differ first). In MLflow's trace search, "
             "``tags.`mtrl_gym.task_id` = '<id>'`` lists the same task under every run.", ""]
    for base_name, trained_name in pairs:
        chosen = pick_pairs(records.get(base_name, []), records.get(trained_name, []), count)
        for b, t in chosen:
            lines += [render_pair(base_name, b, trained_name, t), ""]
    return lines
