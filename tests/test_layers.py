"""The layer rules of docs/architecture.md, checked on every module's imports (AST).

Each rule names a set of modules and what they may not import; a violation is reported
as ``file:line: rule``. Imports inside functions count too (a lazy import is still a
dependency). :func:`check_tree` is pure, so a planted tree in a temporary folder proves
that the check catches what it should.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "mtrl_gym"

#: Modules at the top of the package that form the core.
CORE = {"__init__", "registry", "error", "parsing", "datasets", "jsonl", "stats", "serialization", "messages",
        "models", "mlflow_store", "run_folder"}
#: Heavy frameworks that envs and wrappers never import.
HEAVY = ("torch", "transformers", "peft", "vllm", "trl", "verifiers", "ray", "fastapi", "uvicorn")
#: Env-specific wrappers, which may name their env family (like Gymnasium's Atari wrappers).
ENV_SPECIFIC_WRAPPERS = {"wrappers.wordle_shaping", "wrappers.curriculum", "wrappers.field_reward"}
#: Sub-packages of ``envs`` that are one env family (code outside ``envs`` must not import them).
FAMILIES = ("envs.wordle", "envs.sop", "envs.sandbox")


def _layer(module: str) -> str:
    """``rollout.engine`` -> ``rollout``; top-level core modules -> ``core``; ``eval`` -> ``evaluation``."""
    head = module.split(".")[0]
    if head in CORE:
        return "core"
    return "evaluation" if head == "eval" else head


def _within(target: str, prefixes) -> bool:
    return any(target == p or target.startswith(p + ".") for p in prefixes)


def rules_for(module: str) -> list[tuple[str, tuple[str, ...]]]:
    """``[(rule text, forbidden import prefixes)]`` for the module ``module`` (dotted, without ``mtrl_gym.``)."""
    layer = _layer(module)
    out: list[tuple[str, tuple[str, ...]]] = []
    if layer != "cli":
        out.append(("nothing but cli imports cli", ("mtrl_gym.cli",)))
    if layer == "envs":
        out.append(("envs import no wrappers, rollout, trainers, evaluation, serve, adapters or cli",
                    tuple(f"mtrl_gym.{p}" for p in ("wrappers", "rollout", "trainers", "evaluation", "eval", "serve",
                                                    "adapters"))))
        out.append(("envs import no heavy framework (torch, transformers, ...)", HEAVY))
    if layer == "wrappers":
        out.append(("wrappers import no rollout, trainers, evaluation, serve or adapters",
                    tuple(f"mtrl_gym.{p}" for p in ("rollout", "trainers", "evaluation", "eval", "serve", "adapters"))))
        out.append(("wrappers import no heavy framework (torch, transformers, ...)", HEAVY))
    if layer == "core":
        out.append(("core modules import no wrappers, rollout, trainers, evaluation, serve or adapters",
                    tuple(f"mtrl_gym.{p}" for p in ("wrappers", "rollout", "trainers", "evaluation", "eval", "serve",
                                                    "adapters"))))
    if layer == "rollout":
        out.append(("rollout imports no trainers or evaluation",
                    ("mtrl_gym.trainers", "mtrl_gym.evaluation", "mtrl_gym.eval")))
    if layer == "trainers":
        out.append(("trainers import no evaluation", ("mtrl_gym.evaluation", "mtrl_gym.eval")))
    if layer == "serve":
        out.append(("serve imports no trainers or evaluation",
                    ("mtrl_gym.trainers", "mtrl_gym.evaluation", "mtrl_gym.eval")))
    if layer == "adapters":
        out.append(("adapters import no trainers", ("mtrl_gym.trainers",)))
    if layer not in ("envs",) and module not in ENV_SPECIFIC_WRAPPERS:
        out.append(("only envs (and env-specific wrappers) import a particular env family",
                    tuple(f"mtrl_gym.{f}" for f in FAMILIES)))
    return out


def _imports(tree: ast.AST, module: str) -> list[tuple[int, list[str]]]:
    """``(line, names)`` per import statement: the modules it imports (``from a import b``: ``a`` and ``a.b``)."""
    found = []
    package = module.rsplit(".", 1)[0] if "." in module else ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.append((node.lineno, [alias.name for alias in node.names]))
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                parts = ("mtrl_gym." + package).split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.append((node.lineno, [target, *(f"{target}.{alias.name}" for alias in node.names)]))
    return found


def _env_branches(tree: ast.AST) -> list[int]:
    """Lines comparing against, or testing a prefix of, a particular env family's ids."""
    lines = []
    for node in ast.walk(tree):
        consts = []
        if isinstance(node, ast.Compare):
            consts = [c for c in [node.left, *node.comparators] if isinstance(c, ast.Constant)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("startswith", "endswith"):
            consts = [a for a in node.args if isinstance(a, ast.Constant)]
        for c in consts:
            if isinstance(c.value, str) and c.value.startswith(("mtrl/Wordle", "mtrl/SOP", "mtrl/Sandbox")):
                lines.append(node.lineno)
    return lines


def check_tree(root: Path) -> list[str]:
    """Every violation below ``root`` (a folder laid out like the ``mtrl_gym`` package)."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__") or "__init__"
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for rule, forbidden in rules_for(module):
            for line, targets in _imports(tree, module):
                bad = next((t for t in targets if _within(t, forbidden)), None)
                if bad is not None:
                    problems.append(f"{path.relative_to(root.parent)}:{line}: imports {bad}: {rule}")
        if _layer(module) not in ("envs", "registry") and module != "registry" \
                and module not in ENV_SPECIFIC_WRAPPERS:
            for line in _env_branches(tree):
                problems.append(f"{path.relative_to(root.parent)}:{line}: branches on a particular env id: "
                                "ask the env's profile (mtrl_gym.envs.profile_of) instead")
    return sorted(set(problems))


def test_the_package_keeps_its_layers():
    problems = check_tree(ROOT)
    assert not problems, "layer rules broken (see docs/architecture.md):\n" + "\n".join(problems)


@pytest.mark.parametrize("relpath, source, rule", [
    ("envs/toy.py", "import torch\n", "heavy framework"),
    ("envs/toy.py", "def f():\n    from mtrl_gym.wrappers import SystemPrompt\n", "envs import no wrappers"),
    ("wrappers/toy.py", "from mtrl_gym.rollout.engine import RolloutEngine\n", "wrappers import no rollout"),
    ("datasets.py", "from mtrl_gym.envs.wordle.game import answers\n", "particular env family"),
    ("rollout/engine.py", "from mtrl_gym.trainers.grpo import GRPOTrainer\n", "rollout imports no trainers"),
    ("trainers/grpo/metrics.py", "from mtrl_gym.evaluation.summary import x\n", "trainers import no evaluation"),
    ("evaluation/runner.py", "from mtrl_gym.cli import main\n", "nothing but cli imports cli"),
    ("serve/app.py", "from mtrl_gym.trainers.grpo.config import GRPOConfig\n", "serve imports no trainers"),
    ("adapters/trl.py", "from mtrl_gym.trainers.grpo import losses\n", "adapters import no trainers"),
    ("evaluation/policies.py", "def f(env_id):\n    return env_id.startswith('mtrl/Wordle')\n", "branches on"),
    ("trainers/grpo/data.py", "from ..grpo import x\nfrom ...envs.sop import base\n", "particular env family"),
])
def test_a_planted_forbidden_import_is_caught_with_file_line_and_rule(tmp_path, relpath, source, rule):
    root = tmp_path / "mtrl_gym"
    target = root / relpath
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source, encoding="utf-8")
    problems = check_tree(root)
    assert len(problems) == 1 and rule in problems[0], problems
    assert problems[0].startswith(f"mtrl_gym/{relpath}:") and ": imports " in problems[0] or "branches" in problems[0]


def test_allowed_imports_pass(tmp_path):
    root = tmp_path / "mtrl_gym"
    for relpath, source in {
        "envs/toy.py": "import gymnasium\nfrom mtrl_gym.envs.profile import EnvProfile\nfrom mtrl_gym import parsing\n",
        "wrappers/wordle_shaping.py": "from mtrl_gym.envs.wordle.solver import opening_entropy\n",
        "trainers/grpo/x.py": "from mtrl_gym.rollout.engine import RolloutEngine\nimport torch\n",
        "cli/train.py": "from mtrl_gym.cli import main\nfrom mtrl_gym.evaluation import runner\n",
    }.items():
        (root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / relpath).write_text(source, encoding="utf-8")
    assert check_tree(root) == []
