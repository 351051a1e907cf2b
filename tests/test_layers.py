"""The layer rules of docs/architecture.md, checked on every module's imports (AST).

Each rule names a set of modules and what they may not import; a violation is reported
as ``file:line: rule``. Imports inside functions count too (a lazy import is still a
dependency). Two rules hold across every module: none imports another module's private
(``_``) name, and no modules import each other in a circle (:func:`find_cycles`; only
imports under ``if TYPE_CHECKING:`` are left out, as they never run). :func:`check_tree`
and :func:`find_cycles` are pure, so a planted tree in a temporary folder proves that the
checks catch what they should.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "mtrl_gym"

#: Modules at the top of the package that form the core.
CORE = {"__init__", "registry", "error", "parsing", "datasets", "jsonl", "stats", "serialization", "messages",
        "models", "mlflow_store", "run_folder", "memory", "files"}
#: Heavy frameworks that envs and wrappers never import.
HEAVY = ("torch", "transformers", "peft", "vllm", "trl", "verifiers", "ray", "fastapi", "uvicorn")
#: Env-specific wrappers, which may name their env family (like Gymnasium's Atari wrappers).
ENV_SPECIFIC_WRAPPERS = {"wrappers.wordle_shaping", "wrappers.wordle_recap", "wrappers.curriculum",
                         "wrappers.field_reward"}
#: Sub-packages of ``envs`` that are one env family (code outside ``envs`` must not import them).
FAMILIES = ("envs.wordle", "envs.sop", "envs.sandbox")


def _layer(module: str) -> str:
    """``rollout.engine`` -> ``rollout``; top-level core modules -> ``core``."""
    head = module.split(".")[0]
    return "core" if head in CORE else head


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
                    tuple(f"mtrl_gym.{p}" for p in ("wrappers", "rollout", "trainers", "evaluation", "serve",
                                                    "adapters"))))
        out.append(("envs import no heavy framework (torch, transformers, ...)", HEAVY))
    if layer == "wrappers":
        out.append(("wrappers import no rollout, trainers, evaluation, serve or adapters",
                    tuple(f"mtrl_gym.{p}" for p in ("rollout", "trainers", "evaluation", "serve", "adapters"))))
        out.append(("wrappers import no heavy framework (torch, transformers, ...)", HEAVY))
    if layer == "core":
        out.append(("core modules import no wrappers, rollout, trainers, evaluation, serve or adapters",
                    tuple(f"mtrl_gym.{p}" for p in ("wrappers", "rollout", "trainers", "evaluation", "serve",
                                                    "adapters"))))
    if layer == "rollout":
        out.append(("rollout imports no trainers or evaluation",
                    ("mtrl_gym.trainers", "mtrl_gym.evaluation")))
    if layer == "trainers":
        out.append(("trainers import no evaluation", ("mtrl_gym.evaluation",)))
    if layer == "serve":
        out.append(("serve imports no trainers or evaluation", ("mtrl_gym.trainers", "mtrl_gym.evaluation")))
    if layer == "adapters":
        out.append(("adapters import no trainers", ("mtrl_gym.trainers",)))
    if layer == "evaluation":
        out.append(("evaluation imports no trainers, serve or adapters",
                    ("mtrl_gym.trainers", "mtrl_gym.serve", "mtrl_gym.adapters")))
    if layer == "testing":
        out.append(("testing imports no wrappers, rollout, trainers, evaluation, serve or adapters",
                    tuple(f"mtrl_gym.{p}" for p in ("wrappers", "rollout", "trainers", "evaluation", "serve",
                                                    "adapters"))))
        out.append(("testing imports no heavy framework (torch, transformers, ...)", HEAVY))
    if layer not in ("cli", "testing"):
        out.append(("nothing but cli imports testing (the checkers are a tool for env authors)",
                    ("mtrl_gym.testing",)))
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


def _modules(root: Path) -> dict[str, Path]:
    """``{"mtrl_gym.rollout.engine": path, ...}``: every module below ``root`` (a package folder)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        out[".".join(rel.parts).removesuffix(".__init__")] = path
    return out


def _runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` except those under ``if TYPE_CHECKING:`` (imports for annotations only)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and isinstance(child.test, (ast.Name, ast.Attribute)) and \
                    getattr(child.test, "id", getattr(child.test, "attr", None)) == "TYPE_CHECKING":
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _from_target(node: ast.ImportFrom, name: str, path: Path) -> str:
    """The module a ``from ... import`` statement of module ``name`` (file ``path``) reads from."""
    if not node.level:
        return node.module or ""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    parts = package.split(".")
    base = ".".join(parts[:len(parts) - node.level + 1])
    return f"{base}.{node.module}" if node.module else base


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _sibling(importer: str, module: str) -> bool:
    """Whether ``importer`` is ``module``'s package or a module beside it (who may use a private module)."""
    package = module.rsplit(".", 1)[0]
    return importer == package or importer.rsplit(".", 1)[0] == package


def private_imports(root: Path) -> list[str]:
    """Every use of another module's private (``_``) name below ``root``: ``from m import _x``,
    ``from package import _module`` and ``m._x`` where ``m`` is an imported module."""
    modules = _modules(root)
    problems = []
    for name, path in modules.items():
        where = path.relative_to(root.parent)
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        bound: dict[str, str] = {}  # local name -> the package module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    if any(_private(part) for part in alias.name.split(".")[1:]) and \
                            alias.name.split(".")[0] == root.name and not _sibling(name, alias.name):
                        problems.append(f"{where}:{node.lineno}: imports {alias.name}: a private module of "
                                        "another package")
            elif isinstance(node, ast.ImportFrom):
                target = _from_target(node, name, path)
                if target.split(".")[0] != root.name:
                    continue
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    if full in modules:
                        bound[alias.asname or alias.name] = full
                    if _private(alias.name) and target != name and not (full in modules and _sibling(name, full)):
                        problems.append(f"{where}:{node.lineno}: imports {full}: another module's private name "
                                        "(give the shared helper a public name where both can import it)")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name) \
                    and node.value.id in bound and bound[node.value.id] != name:
                problems.append(f"{where}:{node.lineno}: uses {bound[node.value.id]}.{node.attr}: another "
                                "module's private name (give the shared helper a public name)")
    return sorted(set(problems))


def import_graph(root: Path) -> dict[str, dict[str, int]]:
    """``{module: {imported module: first line}}`` between the modules below ``root``.

    ``from a import b`` is an edge to ``a.b`` when that is a module, else to ``a``; imports
    inside functions count (they run), those under ``if TYPE_CHECKING:`` do not.
    """
    modules = _modules(root)
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        edges: dict[str, int] = {}
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in _runtime_nodes(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _from_target(node, name, path)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                if target in modules and target != name:
                    edges[target] = min(edges.get(target, node.lineno), node.lineno)
        graph[name] = edges
    return graph


def find_cycles(root: Path) -> list[str]:
    """One import circle per strongly connected group of modules below ``root``, each written
    ``a (file:line) -> b (file:line) -> ... -> a``; empty when the imports form no circle."""
    graph = import_graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []
    for start in sorted(graph):  # Tarjan's algorithm, iteratively
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                group = set()
                while True:
                    w = stack.pop()
                    group.add(w)
                    if w == v:
                        break
                if len(group) > 1:
                    groups.append(group)
    out = []
    paths = _modules(root)
    for group in groups:  # walk inside the group from its first module until a module repeats
        path = [min(group)]
        while True:
            nxt = min(t for t in graph[path[-1]] if t in group)
            if nxt in path:
                path = path[path.index(nxt):] + [nxt]
                break
            path.append(nxt)
        hops = [f"{a} ({paths[a].relative_to(root.parent)}:{graph[a][b]})" for a, b in zip(path, path[1:])]
        out.append(" -> ".join([*hops, path[-1]]))
    return sorted(out)


def check_tree(root: Path) -> list[str]:
    """Every layer violation below ``root`` (a folder laid out like the ``mtrl_gym`` package)."""
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


def test_no_module_imports_another_modules_private_name():
    problems = private_imports(ROOT)
    assert not problems, "cross-module private imports (see docs/architecture.md):\n" + "\n".join(problems)


def test_no_modules_import_each_other_in_a_circle():
    cycles = find_cycles(ROOT)
    assert not cycles, "import circles (see docs/architecture.md):\n" + "\n".join(cycles)


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
    ("evaluation/runner.py", "def f():\n    from mtrl_gym.trainers.grpo import GRPOTrainer\n",
     "evaluation imports no trainers"),
    ("evaluation/backends.py", "from mtrl_gym.serve.app import make_app\n", "evaluation imports no trainers, serve"),
    ("testing/check.py", "from mtrl_gym.rollout.engine import RolloutEngine\n", "testing imports no wrappers, rollout"),
    ("testing/leak.py", "import torch\n", "testing imports no heavy framework"),
    ("rollout/engine.py", "from mtrl_gym.testing.check import check_text_env\n", "nothing but cli imports testing"),
])
def test_a_planted_forbidden_import_is_caught_with_file_line_and_rule(tmp_path, relpath, source, rule):
    root = tmp_path / "mtrl_gym"
    target = root / relpath
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source, encoding="utf-8")
    problems = check_tree(root)
    assert len(problems) == 1 and rule in problems[0], problems
    assert problems[0].startswith(f"mtrl_gym/{relpath}:") and ": imports " in problems[0] or "branches" in problems[0]


def _plant(tmp_path, files: dict[str, str]) -> Path:
    root = tmp_path / "mtrl_gym"
    for relpath, source in files.items():
        (root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / relpath).write_text(source, encoding="utf-8")
    return root


@pytest.mark.parametrize("source, what", [
    ("from mtrl_gym.testing.check import CheckResult, _script\n", "imports mtrl_gym.testing.check._script"),
    ("def f():\n    from .check import _script\n", "imports mtrl_gym.testing.check._script"),
    ("from mtrl_gym.testing import check\nx = check._script\n", "uses mtrl_gym.testing.check._script"),
    ("import mtrl_gym.testing.check as c\nx = c._script\n", "uses mtrl_gym.testing.check._script"),
    ("from mtrl_gym import _hidden\n", "imports mtrl_gym._hidden"),
])
def test_a_planted_private_import_is_caught_with_file_and_line(tmp_path, source, what):
    root = _plant(tmp_path, {"testing/check.py": "def _script():\n    return []\n", "_hidden.py": "",
                             "testing/leak.py": source})
    problems = private_imports(root)
    assert len(problems) == 1 and problems[0].startswith("mtrl_gym/testing/leak.py:") and what in problems[0], problems
    assert "private" in problems[0]


def test_a_module_may_use_its_own_private_names_and_public_ones_of_others(tmp_path):
    root = _plant(tmp_path, {"a.py": "def _helper():\n    pass\n\ndef public():\n    return _helper()\n",
                             "b.py": "from mtrl_gym.a import public\nimport mtrl_gym.a as a\nx = a.public, a.__doc__\n",
                             "pkg/__init__.py": "from mtrl_gym.pkg import _impl\n", "pkg/_impl.py": ""})
    assert private_imports(root) == []


def test_a_planted_import_circle_is_reported_with_files_and_lines(tmp_path):
    root = _plant(tmp_path, {
        "envs/wordle/env.py": "class Env:\n    def profile(self):\n        from mtrl_gym.envs.wordle.profile import p\n",
        "envs/wordle/profile.py": "import mtrl_gym.envs.wordle.metrics\n",
        "envs/wordle/metrics.py": "\n\nfrom mtrl_gym.envs.wordle import env\n",
        "envs/wordle/__init__.py": "",
        "envs/wordle/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                "    from mtrl_gym.envs.wordle.untyped import X\n",
        "envs/wordle/untyped.py": "from mtrl_gym.envs.wordle.typed import TYPE_CHECKING\n",
    })
    assert find_cycles(root) == [
        "mtrl_gym.envs.wordle.env (mtrl_gym/envs/wordle/env.py:3) -> "
        "mtrl_gym.envs.wordle.profile (mtrl_gym/envs/wordle/profile.py:1) -> "
        "mtrl_gym.envs.wordle.metrics (mtrl_gym/envs/wordle/metrics.py:3) -> mtrl_gym.envs.wordle.env"]


def test_a_package_that_imports_its_modules_is_no_circle(tmp_path):
    root = _plant(tmp_path, {"envs/__init__.py": "from mtrl_gym.envs.a import A\n",
                             "envs/a.py": "from mtrl_gym.envs.b import B\n", "envs/b.py": "B = 1\n"})
    assert find_cycles(root) == []


def test_allowed_imports_pass(tmp_path):
    root = tmp_path / "mtrl_gym"
    for relpath, source in {
        "envs/toy.py": "import gymnasium\nfrom mtrl_gym.envs.profile import EnvProfile\nfrom mtrl_gym import parsing\n",
        "wrappers/wordle_shaping.py": "from mtrl_gym.envs.wordle.solver import opening_entropy\n",
        "trainers/grpo/x.py": "from mtrl_gym.rollout.engine import RolloutEngine\nimport torch\n",
        "cli/train.py": "from mtrl_gym.cli import main\nfrom mtrl_gym.evaluation import runner\n",
        "cli/check.py": "from mtrl_gym.testing.check import check_text_env\n",
        "evaluation/runner.py": "from mtrl_gym.rollout.engine import RolloutEngine\nfrom mtrl_gym.envs.profile import p\n",
        "testing/check.py": "from mtrl_gym.envs.profile import profile_of\nfrom mtrl_gym.testing.kit import x\n",
    }.items():
        (root / relpath).parent.mkdir(parents=True, exist_ok=True)
        (root / relpath).write_text(source, encoding="utf-8")
    assert check_tree(root) == []


# ---------------------------------------------------------------------------------------------- tests mirror

#: Test folders with no package folder of the same path, and why.
_TEST_FOLDERS_OF_THEIR_OWN = {
    "vllm": "the vLLM sampler tests, run in a venv of their own (.ci/vllm.sh)",
    "benchmarks": "the scripts in benchmarks/",
    "envs/wordle/wordle_frozen": "a frozen copy of the old Wordle env (the differential test's reference)",
}


def test_the_test_folders_mirror_the_package():
    tests = ROOT.parent / "tests"
    folders = {p.relative_to(tests).as_posix() for p in tests.rglob("*") if p.is_dir() and "__pycache__" not in p.parts}
    strays = sorted(f for f in folders if not (ROOT / f).is_dir()
                    and not any(f == own or f.startswith(own + "/") for own in _TEST_FOLDERS_OF_THEIR_OWN))
    assert not strays, f"test folders with no package folder of the same path under mtrl_gym/: {strays}"
