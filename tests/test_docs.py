"""The documentation stays complete and true: the public namespace, the API reference, the generated tables,
the example pages, the citations and the MkDocs site."""

import importlib
import os
import re
import subprocess
import sys
import types

import pytest
import yaml

import coresets_jax as cj

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
REFERENCE = os.path.join(DOCS, "reference")
DIRECTIVE = re.compile(r"^::: (\S+)", re.M)
sys.path[:0] = [DOCS, os.path.join(ROOT, "benchmarks")]
import build  # noqa: E402  (docs/build.py)
import tables  # noqa: E402  (docs/tables.py)

DOCUMENTED_SUBMODULES = {"io", "progress", "registry"}


def test_dir_lists_exactly_the_documented_surface():
    # dir(cj) is __all__, the documented submodules and the version: not the implementation modules that
    # importing the package binds as attributes (cj.construct, cj.weighting, ...).
    assert set(dir(cj)) == set(cj.__all__) | DOCUMENTED_SUBMODULES | {"__version__"}
    assert len(dir(cj)) == len(set(dir(cj)))
    modules = {n for n in dir(cj) if isinstance(getattr(cj, n), types.ModuleType)}
    assert {"models", "metrics", "data", "inference", "registry", "solvers", "compilation", "progress"} <= modules
    for hidden in ("construct", "weighting", "features", "posterior_driven", "certification", "scale", "interop"):
        assert hidden not in dir(cj)
        assert isinstance(getattr(cj, hidden), types.ModuleType)  # still importable as an attribute


def _resolve(path: str):
    """The object a `::: dotted.path` directive names: the longest importable module prefix, then attributes."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(path)


def _directives() -> dict:
    found = {}
    for name in sorted(os.listdir(REFERENCE)):
        if name.endswith(".md"):
            for path in DIRECTIVE.findall(open(os.path.join(REFERENCE, name), encoding="utf-8").read()):
                found[path] = name
    return found


def test_the_api_reference_documents_every_public_name():
    # Each name of cj.__all__, of the documented submodules, and of cj.models, cj.metrics and cj.data's
    # __all__ has a `::: path` directive in docs/reference/*.md that resolves to that very object.
    directives = _directives()
    documented = [_resolve(path) for path in directives]
    public = [(f"cj.{n}", getattr(cj, n)) for n in sorted(set(cj.__all__) | DOCUMENTED_SUBMODULES)]
    for sub in ("models", "metrics", "data"):
        module = getattr(cj, sub)
        public += [(f"cj.{sub}.{n}", getattr(module, n)) for n in module.__all__]
    missing = [label for label, obj in public if not any(obj is d for d in documented)]
    assert not missing, f"not in docs/reference/*.md (add a '::: path' directive): {missing}"


def test_every_directive_names_where_the_object_is_defined():
    # mkdocstrings reads the source statically: a path through a re-export whose name is also a submodule
    # (coresets_jax.inference.sample, coresets_jax.posterior_driven.refine) would render the module, so
    # directives name the object's own module.
    for path in _directives():
        obj = _resolve(path)
        if isinstance(obj, types.ModuleType):
            assert obj.__name__ == path
        elif isinstance(obj, (types.FunctionType, type)):
            assert f"{obj.__module__}.{obj.__qualname__}" == path, path


def test_the_generated_tables_match_the_results_files():
    assert tables.main(["--check"]) == 0, "run: python docs/tables.py"
    listed = {}
    for path in tables.files():
        for m in tables.REGION.finditer(open(path, encoding="utf-8").read()):
            listed.setdefault(m.group("name"), []).append(path)
    assert set(tables.TABLES) <= set(listed), "a table with no region in the docs"


def test_table_provenance_has_no_commit_in_the_readme(tmp_path):
    text = "<!-- table:certify -->\n<!-- /table:certify -->\n"
    in_docs = tables.render(text, os.path.join(DOCS, "performance.md"))
    in_readme = tables.render(text, os.path.join(ROOT, "README.md"))
    commit = tables._load("certify")["environment"]["git_commit"]
    assert commit in in_docs and commit not in in_readme


def test_the_example_pages_show_their_scripts_and_figures():
    names = build.example_names()
    assert {"logistic_regression", "poisson_regression", "numpyro_negative_binomial", "bradley_terry"} <= set(names)
    for name in names:
        source = open(os.path.join(DOCS, "examples", name + ".py"), encoding="utf-8").read()
        page = open(os.path.join(DOCS, "examples", name + ".md"), encoding="utf-8").read()
        marked = {(b.kind, b.name): b.text for b in build.blocks(page)}
        assert marked[("exec", name)].rstrip("\n") == build.split_docstring(source)[2].rstrip("\n"), \
            f"docs/examples/{name}.md is stale: python docs/build.py --examples {name}"
        assert marked[("output", name)].strip(), name
        figures = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", page)
        assert figures, f"{name}: no figure"
        for fig in figures:
            assert os.path.exists(os.path.join(DOCS, "examples", fig)), fig


def test_the_citing_page_has_every_reference_of_citation_cff():
    cff = yaml.safe_load(open(os.path.join(ROOT, "CITATION.cff"), encoding="utf-8"))
    page = re.sub(r"[{}]", "", open(os.path.join(DOCS, "citing.md"), encoding="utf-8").read()).lower()
    for ref in cff["references"]:
        assert ref["title"].lower() in page, ref["title"]
    assert f"version = {{{cff['version']}}}" in open(os.path.join(DOCS, "citing.md"), encoding="utf-8").read()


def test_readme_and_docs_links_point_at_files():
    link = re.compile(r"\]\(([^)#\s]+\.(?:md|png))(?:#[^)]*)?\)")
    for path in build.markdown_files():
        text = open(path, encoding="utf-8").read()
        for target in link.findall(text):
            if "://" in target:
                continue
            assert os.path.exists(os.path.join(os.path.dirname(path), target)), f"{path}: {target}"


def test_the_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site"),
                          "--config-file", os.path.join(ROOT, "mkdocs.yml")], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    html = "".join(open(os.path.join(dirpath, f), encoding="utf-8").read()
                   for dirpath, _, files in os.walk(tmp_path / "site" / "reference") for f in files
                   if f.endswith(".html"))
    for path in _directives():
        assert f'id="{path}"' in html, f"{path} is not rendered"
