"""The human side of an evaluation: a results table, PNG plots and a markdown report.

:func:`write_report` writes into one folder:

* ``success_pass_at_k.png``: per run, bars of pass@k for every k (pass@1 is the success
  rate, the axis in %), with the bootstrap intervals as error bars; a 0 % bar is drawn
  as a thick stroke on the axis;
* ``training_curves.png`` (when a training run was given): its training reward and its
  external success metric per step, with each evaluated run's success rate as a
  horizontal line (runs with the same rate share one line, named in its label), so a
  validation curve at one temperature can be read against the serving settings;
* ``report.md``: the settings, the results table, flags, the plots, a few full
  trajectories rendered as a trace (model turn, tool call, feedback) and, when a base model
  and its trained adapter were both evaluated, paired episodes of the same task and seed,
  turn by turn (:mod:`mtrl_gym.evaluation.pairs`).

:func:`text_table` is the same results table for a terminal. matplotlib is imported only
when plots are drawn, with the ``Agg`` backend (no display needed).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mtrl_gym.evaluation.pairs import pairs_section

__all__ = ["write_report", "plot_pass_at_k", "plot_training_curves", "text_table", "render_trajectory",
           "pick_examples"]


def _pct(x: float | None) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def _num(x: float | None, fmt: str = ".2f") -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _ci_pct(ci: Mapping[str, float]) -> str:
    return f"{_pct(ci['value'])} [{_pct(ci['low'])}, {_pct(ci['high'])}]"


def _ci_num(ci: Mapping[str, float]) -> str:
    return f"{ci['value']:+.3f} [{ci['low']:+.3f}, {ci['high']:+.3f}]"


def _settings(spec: Mapping[str, Any]) -> str:
    if spec.get("kind") == "policy":
        return "reference policy"
    parts = [f"T={spec.get('temperature')}", f"top_p={spec.get('top_p')}"]
    if spec.get("top_k"):
        parts.append(f"top_k={spec['top_k']}")
    parts.append(f"max_tokens={spec.get('max_new_tokens')}")
    if spec.get("system_prompt", "default") != "default":
        parts.append(f"system={spec['system_prompt']}")
    return ", ".join(parts)


def _source(spec: Mapping[str, Any]) -> str:
    kind = spec.get("kind")
    if kind == "policy":
        return f"policy {spec.get('policy')}"
    if kind == "endpoint":
        model = f" ({spec['endpoint_model']})" if spec.get("endpoint_model") else ""
        return f"endpoint {spec.get('endpoint')}{model}"
    if kind == "adapter":
        return f"adapter {spec.get('adapter')}" + (f" on {spec['model']}" if spec.get("model") else "")
    if kind == "sampler":
        return f"sampler {spec.get('sampler')}"
    return f"model {spec.get('model')}"


def _rows(summary: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    runs = summary["runs"]
    ks = [k for k in next(iter(runs.values()))["pass_at_k"] if k != "1"] if runs else []
    head = ["run", "source", "settings", "success [CI]", "reward [CI]", *[f"pass@{k}" for k in ks],
            "vs reference", "turns", "tool calls", "format err", "invalid", "tokens/ep", "unfinished", "failed"]
    rows = []
    for name, s in runs.items():
        t = s["trajectory"]
        vs = s.get("vs_reference")
        rows.append([name, _source(s["spec"]), _settings(s["spec"]), _ci_pct(s["success_rate"]), _ci_num(s["reward"]),
                     *[_pct(s["pass_at_k"][k]["value"]) for k in ks],
                     (f"{100 * vs['success_rate']['value']:+.1f} pts" if vs else "(reference)" if
                      name == summary.get("reference") else "—"),
                     _num(t["turns"]), _num(t["tool_calls"]), _pct(t["format_error_rate"]),
                     _pct(t["invalid_action_rate"]), _num(t["total_tokens"], ".0f"), _pct(t["unfinished_rate"]),
                     _pct(t["failure_rate"])])
    return head, rows


def text_table(summary: Mapping[str, Any]) -> str:
    """The results table as aligned plain text (one line per run)."""
    head, rows = _rows(summary)
    keep = [i for i, h in enumerate(head) if h not in ("source", "settings")]
    table = [[head[i] for i in keep]] + [[r[i] for i in keep] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(keep))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table)


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        from mtrl_gym.error import DependencyNotInstalled

        raise DependencyNotInstalled("matplotlib", extra="train") from None
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def plot_pass_at_k(summary: Mapping[str, Any], path: str | Path) -> Path:
    """Bar chart of pass@k per run (k = 1 is the success rate) with interval error bars."""
    plt = _pyplot()
    fig = pass_at_k_figure(summary)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def pass_at_k_figure(summary: Mapping[str, Any]):
    """The matplotlib figure :func:`plot_pass_at_k` saves."""
    plt = _pyplot()
    runs = summary["runs"]
    names = list(runs)
    ks = list(next(iter(runs.values()))["pass_at_k"])
    width = 0.8 / len(ks)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(names) * max(1, len(ks)) ** 0.5 + 2), 4.2))
    for j, k in enumerate(ks):
        values = [runs[n]["pass_at_k"][k]["value"] for n in names]
        low = [v - runs[n]["pass_at_k"][k]["low"] for v, n in zip(values, names)]
        high = [runs[n]["pass_at_k"][k]["high"] - v for v, n in zip(values, names)]
        xs = [i - 0.4 + width * (j + 0.5) for i in range(len(names))]
        bars = ax.bar(xs, values, width * 0.92, yerr=[low, high], capsize=2,
                      label="success (pass@1)" if k == "1" else f"pass@{k}")
        _mark_zero_bars(ax, bars)
        ax.bar_label(bars, labels=[f"{100 * v:.0f}%" for v in values], padding=2, fontsize=7)
    ax.set_xticks(range(len(names)), names, rotation=20 if len(names) > 4 else 0,
                  ha="right" if len(names) > 4 else "center")
    ax.set_ylim(-0.03, 1.12)
    ax.axhline(0, color="0.4", linewidth=0.6)
    from matplotlib.ticker import PercentFormatter

    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_ylabel("tasks solved (success, pass@k)")
    ax.set_title(f"{summary['env_id']}: {summary['tasks']} tasks x {summary['samples_per_task']} samples")
    ax.legend(fontsize=8, ncol=min(len(ks), 6), loc="upper center", bbox_to_anchor=(0.5, -0.1 if len(names) <= 4
                                                                                     else -0.22))
    ax.grid(axis="y", alpha=0.3)
    return fig


def _mark_zero_bars(ax, bars) -> None:
    """A thick stroke in the bar's colour where a bar has zero height, so that a 0 % bar is
    seen (and told apart from a missing one)."""
    for bar in bars:
        if bar.get_height() == 0:
            x, w = bar.get_x(), bar.get_width()
            ax.plot([x, x + w], [0, 0], color=bar.get_facecolor(), linewidth=4, solid_capstyle="butt",
                    zorder=3, gid="zero-bar")


def _level_lines(runs: Mapping[str, Mapping[str, Any]]) -> list[tuple[float, list[str]]]:
    """Evaluated success rates as ``(rate, run names)``, runs with the same rate on one line."""
    levels: dict[float, list[str]] = {}
    for name, s in runs.items():
        levels.setdefault(round(float(s["success_rate"]["value"]), 6), []).append(name)
    return sorted(levels.items())


def plot_training_curves(curves, summary: Mapping[str, Any], path: str | Path) -> Path:
    """Training reward and external success per step; evaluated success rates as lines."""
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True)
    reward, success = curves.get(curves.reward_key), curves.get(curves.success_key)
    if reward:
        top.plot([s for s, _ in reward], [v for _, v in reward], marker="." if len(reward) < 50 else None)
    top.set_ylabel(f"training reward\n({curves.reward_key or 'not logged'})", fontsize=9)
    top.grid(alpha=0.3)
    if success:
        label = curves.success_key
        if curves.success_key and curves.success_key.startswith("val/") and "val_temperature" in curves.settings:
            label += f" (training's validation, T={curves.settings['val_temperature']:g})"
        bottom.plot([s for s, _ in success], [v for _, v in success], color="black",
                    marker="." if len(success) < 50 else None, label=label)
    for i, (rate, names) in enumerate(_level_lines(summary["runs"])):
        bottom.axhline(rate, linestyle="--", linewidth=1, color=f"C{i % 10}",
                       label=f"eval {', '.join(names)}: {rate:.0%}")
    bottom.set_ylabel("success rate", fontsize=9)
    bottom.set_xlabel("training step")
    bottom.set_ylim(-0.02, 1.02)
    bottom.grid(alpha=0.3)
    bottom.legend(fontsize=7, loc="best")
    top.set_title(f"training run {curves.source}", fontsize=9)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def pick_examples(records: Sequence[Mapping[str, Any]], count: int) -> list[Mapping[str, Any]]:
    """Up to ``count`` episodes to show: the first success and the first failure, then more in order."""
    if count <= 0 or not records:
        return []
    ordered = sorted(records, key=lambda r: (r["task_index"], r["sample_index"]))
    chosen = [r for r in (next((r for r in ordered if r["success"]), None),
                          next((r for r in ordered if not r["success"]), None)) if r is not None][:count]
    for r in ordered:
        if len(chosen) >= count:
            break
        if r not in chosen:
            chosen.append(r)
    return sorted(chosen, key=lambda r: (r["task_index"], r["sample_index"]))


def _fence(text: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}text\n{text}\n{ticks}"


def render_trajectory(record: Mapping[str, Any], *, actor: str = "model") -> str:
    """One episode as a markdown trace: system prompt (folded), then each turn in order.

    ``actor`` names who wrote the assistant turns (``"model"``, ``"policy"``).
    """
    outcome = "success" if record.get("success") else ("failed: " + str(record.get("failure_reason"))
                                                        if record.get("failed") else "no success")
    head = (f"#### {record.get('run')} — task {record.get('task_id')} (#{record['task_index']}), "
            f"sample {record['sample_index']}: {outcome}, reward {float(record['outcome_reward']):+.3f}, "
            f"{int(record.get('metrics', {}).get('turns', 0))} turns, stop: {record.get('stop_reason')}")
    parts = [head]
    turn = 0
    for m in record.get("messages") or []:
        role, content = m.get("role"), str(m.get("content", ""))
        if role == "system":
            parts.append(f"<details><summary>system prompt</summary>\n\n{_fence(content)}\n\n</details>")
        elif role == "assistant":
            turn += 1
            parts.append(f"**{actor}, turn {turn}:**\n\n{_fence(content)}")
        elif role == "tool":
            parts.append(f"**tool `{m.get('name') or 'tool'}` result:**\n\n{_fence(content)}")
        else:
            parts.append(f"**{role}:**\n\n{_fence(content)}")
    return "\n\n".join(parts)


def _markdown(summary: Mapping[str, Any], records: Mapping[str, Sequence[Mapping[str, Any]]], plots: dict[str, str],
              examples: int) -> str:
    head, rows = _rows(summary)
    conf = next(iter(summary["runs"].values()))["success_rate"]["confidence"] if summary["runs"] else 0.95
    lines = [f"# Evaluation of {summary['env_id']}", "",
             f"{summary['tasks']} tasks x {summary['samples_per_task']} samples per run, seed {summary['seed']}; "
             "every run plays the same tasks with the same reset seeds. Success and reward are the bare "
             "environment's outcome (never a shaped training reward). Intervals: "
             f"{100 * conf:g}% bootstrap over tasks; pass@k: unbiased estimator.", "", "## Results", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    if summary.get("reference"):
        lines += ["", f"*vs reference*: success-rate difference to `{summary['reference']}` (paired over tasks)."]
    if summary.get("baselines"):
        b = summary["baselines"]
        lines += ["", f"Reference policies: random {_pct(b['random'])}, solver {_pct(b['solver'])} success. "
                      "Position between them ((success - random) / (solver - random)): "
                  + ", ".join(f"{n} {_num(s.get('baseline_position'))}" for n, s in summary["runs"].items())]
    lines += ["", "## Flags", ""]
    if summary.get("flags"):
        lines += [f"- **Warning** ({f['run']}, {f['kind']}): {f['message']}" for f in summary["flags"]]
    elif summary.get("training_run"):
        lines.append("None: the training reward and the external success metric do not diverge.")
    else:
        lines.append("No training run given (`--training-run`): reward-hacking checks skipped.")
    run = summary.get("training_run")
    if run:
        settings = run.get("settings") or {}
        temps = ", ".join(f"{k} {v:g}" for k, v in settings.items())
        last = run["success"][-1][1] if run.get("success") else None
        lines += ["", "## Training run", "",
                  f"`{run['source']}`: training reward `{run['reward_key']}`, external metric `{run['success_key']}`"
                  + (f" (last value {_pct(last)})" if last is not None else "")
                  + (f"; training settings: {temps}" if temps else "") + ". The rows above use their own "
                  "serving settings: a validation curve at another temperature is not what users will see."]
    lines += ["", "## Plots", ""] + [f"![{name}]({file})" for name, file in plots.items()]
    if examples:
        lines += ["", "## Example trajectories", ""]
        for name, recs in records.items():
            actor = "policy" if summary["runs"][name]["spec"].get("kind") == "policy" else "model"
            for r in pick_examples(recs, examples):
                lines += [render_trajectory(r, actor=actor), ""]
    lines += pairs_section(summary, records, examples)
    return "\n".join(lines).rstrip() + "\n"


def write_report(summary: Mapping[str, Any], records: Mapping[str, Sequence[Mapping[str, Any]]], folder: str | Path,
                 *, curves=None, examples: int = 2) -> dict[str, str]:
    """Write the plots and ``report.md`` into ``folder``; returns ``{"report": path, "plots/...": path}``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    plots = {"success and pass@k": plot_pass_at_k(summary, folder / "success_pass_at_k.png").name}
    if curves is not None:
        plots["training curves"] = plot_training_curves(curves, summary, folder / "training_curves.png").name
    report = folder / "report.md"
    report.write_text(_markdown(summary, records, plots, examples), encoding="utf-8")
    out = {"report": str(report)}
    out.update({f"plots/{Path(p).stem}": str(folder / p) for p in plots.values()})
    return out
