"""The package layout: one subpackage per stage, no import circle between stages, and the old paths of moved
modules kept for one release with a DeprecationWarning (coresets_jax/_deprecated.py; docs/extending.md,
"The layout"). Static (ast) and in-process: no JAX work."""

import ast
import importlib
import re
import sys
import warnings
from pathlib import Path

import pytest

import coresets_jax as cj
from coresets_jax import _deprecated

ROOT = Path(cj.__file__).resolve().parent
REPO = ROOT.parent

STAGES = {"baselines", "certification", "cli", "construct", "core", "features", "inference", "interop", "models",
          "posterior_driven", "scale", "sensitivity", "solvers", "weighting"}
# Beside the stages: the package's façade and the documented top-level modules (cj.data, cj.metrics,
# cj.registry, cj.progress, cj.compilation) with the CLI's figures (`from coresets_jax import plots`).
ROOT_MODULES = {"__init__", "_deprecated", "compilation", "data", "metrics", "plots", "progress", "registry"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    path = ROOT.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports(path: Path, module_level: bool):
    """(line, imported module, imported name or None) for each import of the package in `path`; with
    `module_level`, only those run when the module is imported (not inside functions)."""
    name, is_package = _module_name(path), path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes, found = list(tree.body), []
    while nodes:
        node = nodes.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and module_level:
            continue
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] == "coresets_jax"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[:len(name.split(".")) - node.level + is_package]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "coresets_jax":
                continue
            # `from .. import progress` imports the module coresets_jax.progress; `from .x import f`, x itself
            found += [(node.lineno, f"{target}.{a.name}", None) if _is_module(f"{target}.{a.name}")
                      else (node.lineno, target, a.name) for a in node.names]
        else:
            nodes += list(ast.iter_child_nodes(node))
    return found


def _stage(module: str) -> str:
    """The node of the graph a module belongs to: its subpackage, a root module itself, or the façade."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "coresets_jax"


def _stage_graph() -> dict:
    graph = {}
    for path in sorted(ROOT.rglob("*.py")):
        source = _stage(_module_name(path))
        for line, target, _ in _imports(path, module_level=True):
            if _stage(target) != source:
                graph.setdefault(source, {}).setdefault(_stage(target), f"{path.relative_to(REPO)}:{line}")
    return graph


def _find_cycle(graph: dict):
    """A list of nodes [a, b, ..., a] forming a cycle, or None (depth-first search)."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_stages_import_each_other_without_a_circle():
    graph = _stage_graph()
    assert {"core", "construct", "scale", "features", "weighting"} <= set(graph), graph  # the parse sees them
    assert not set(graph.get("core", {})) - {"compilation"}, f"core imports a stage: {graph['core']}"
    cycle = _find_cycle(graph)
    where = [f"{a} -> {b} ({graph[a][b]})" for a, b in zip(cycle, cycle[1:])] if cycle else []
    assert cycle is None, "import circle between stages (module-level imports):\n" + "\n".join(where)


def test_the_cycle_check_finds_a_circle():
    assert _find_cycle({"a": {"b": ""}, "b": {"c": ""}, "c": {"a": ""}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b": ""}, "b": {"c": ""}, "d": {"a": ""}}) is None


def test_no_module_imports_another_modules_private_names():
    for path in ROOT.rglob("*.py"):
        for line, target, name in _imports(path, module_level=False):
            private = name is not None and name.startswith("_") and not name.startswith("__")
            assert not private, f"{path.relative_to(REPO)}:{line} imports {target}.{name}: give it a public name"


def test_the_root_holds_only_the_stages_and_the_documented_modules():
    modules = {p.stem for p in ROOT.glob("*.py")}
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert modules == ROOT_MODULES, f"move {sorted(modules - ROOT_MODULES)} into the stage that owns it"
    assert packages == STAGES


def test_no_code_of_ours_uses_an_old_path():
    old = "|".join(_deprecated.MOVED)
    for path in ROOT.rglob("*.py"):  # every import, also those inside functions
        for line, target, _ in _imports(path, module_level=False):
            assert not re.fullmatch(rf"coresets_jax\.({old})(\..*)?", target), f"{path}:{line} imports {target}"
    pattern = re.compile(rf"\b(coresets_jax|cj)\.({old})\b")
    files = [*REPO.glob("tests/*.py"), *REPO.glob("benchmarks/**/*.py"), *REPO.glob("docs/**/*.py"),
             *REPO.glob("docs/**/*.md"), REPO / "README.md"]
    for path in files:
        if path.name != "test_layout.py":
            for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                match = pattern.search(text)
                if match and match.group(0) != "cj.compress":  # cj.compress is the public function
                    pytest.fail(f"{path.relative_to(REPO)}:{number} uses the old path {match.group(0)}")


@pytest.fixture
def forget_old_paths():
    """Each check starts as a fresh process would: no old path imported yet."""
    def forget():
        for old in _deprecated.MOVED:
            sys.modules.pop(f"coresets_jax.{old}", None)
    forget()
    yield
    forget()


@pytest.mark.parametrize("old", sorted(_deprecated.MOVED))
def test_an_old_path_warns_and_is_the_new_module(old, forget_old_paths):
    new = importlib.import_module(f"coresets_jax.{_deprecated.MOVED[old]}")
    match = rf"coresets_jax\.{old} is deprecated.*use coresets_jax\.{_deprecated.MOVED[old]}"
    with pytest.warns(DeprecationWarning, match=match):
        assert importlib.import_module(f"coresets_jax.{old}") is new
    if old == "compress":  # cj.compress was and is the function; the import did not rebind it
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            assert cj.compress is new.compress
    else:  # still warns after the import bound nothing on the package
        with pytest.warns(DeprecationWarning, match=match):
            assert getattr(cj, old) is new


def test_the_old_import_statements_warn(forget_old_paths):
    with pytest.warns(DeprecationWarning, match=r"use coresets_jax\.(weighting\.pihat|features\.projection)") as record:
        import coresets_jax.pihat
        from coresets_jax.projection import project
        assert coresets_jax.pihat is cj.weighting.pihat and project is cj.project
    assert {r.filename for r in record} == {__file__}  # each warning points at the line that imports
    with pytest.raises(AttributeError):
        cj.no_such_module
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("coresets_jax.no_such_module")


def test_new_paths_and_documented_names_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for stage in sorted(STAGES):  # (cli and baselines are imported on first use)
            module = importlib.import_module(f"coresets_jax.{stage}")
            assert getattr(cj, stage) is module
        for old, new in _deprecated.ALIASES.items():  # cj.sharding, import coresets_jax.sharding, ...
            module = importlib.import_module(f"coresets_jax.{new}")
            assert getattr(cj, old) is module and importlib.import_module(f"coresets_jax.{old}") is module
        import coresets_jax.streaming
        from coresets_jax.sharding import shard
    assert coresets_jax.streaming.stream_coreset is cj.stream_coreset and shard is cj.shard
