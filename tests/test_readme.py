"""README.md stays true: its quickstarts run as written and print what the README shows.

Each script is read from README.md itself (the ```python block after `<!-- exec NAME -->`), run in a fresh
process, and what it prints is compared with the README's `<!-- output NAME -->` block token by token
(`docs/build.py`'s `compare`): text exactly, whitespace never (NumPy's padding changes with the digits),
numbers within 2% or 2e-3 (XLA's CPU code differs between processors), Monte Carlo diagnostics such as
k-hat and ESS more loosely, times not at all. `python docs/build.py --readme` rewrites the blocks.

The JAX quickstart takes about 25 s with a warm compilation cache and 40-70 s cold on the shared 2-core
machine, so it runs in the fast set; the NumPyro one is slower and runs with the slow set.
"""

import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
sys.path.insert(0, os.path.join(ROOT, "docs"))
import build  # noqa: E402  (docs/build.py)


def _check(name: str) -> None:
    code, shown = build.script_and_output(README, name)
    printed, _ = build.run_script(code, timeout=900)
    problems = build.compare(printed, shown)
    assert not problems, "\n".join([f"README.md, {name}: what it prints differs from what it shows:", *problems,
                                    "--- printed:", printed, "--- shown:", shown])


def test_the_jax_quickstart_prints_what_the_readme_shows():
    _check("quickstart")


@pytest.mark.slow
def test_the_numpyro_quickstart_prints_what_the_readme_shows():
    _check("numpyro")


def test_every_readme_script_has_its_output_block():
    marked = build.blocks(open(README, encoding="utf-8").read())
    scripts = {b.name for b in marked if b.kind == "exec"}
    outputs = {b.name for b in marked if b.kind == "output"}
    assert scripts == outputs == {"quickstart", "numpyro"}
    # The heading benchmarks/cold_start.py times (common.readme_block) holds the quickstart.
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import common
    assert common.readme_block("## Quickstart: a JAX model") == build.script_and_output(README, "quickstart")[0]


def test_the_readme_is_short_and_has_no_history():
    text = open(README, encoding="utf-8").read()
    assert len(text.splitlines()) <= 220
    assert not re.search(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b", text), "a commit hash"
    assert not re.search(r"\bissue \d+", text, re.I), "an issue number in the README"
    for command in ("pip install -e . && coresets-jax run --out out/",
                    'pip install -e ".[test]" && JAX_DISABLE_MOST_OPTIMIZATIONS=1 python -m pytest -n 2 --dist loadfile -m "not slow" '
                    'tests'):
        assert command in text


def test_the_output_check_can_fail():
    shown = "Certificate(verdict='good', khat=0.400, kl=7.66e-06 ± 9.6e-07, ess=1000 of 1000, time=0.24s)"
    assert build.compare(shown.replace("0.24s", "9.1s"), shown) == []              # times are not compared
    assert build.compare(shown.replace("khat=0.400", "khat=0.450"), shown) == []   # k-hat is noisy
    assert build.compare("[ 2.99  2.97\n -0.07]", "[2.99 2.97 -0.07]") == []       # whitespace never counts
    assert build.compare("relative_error=0.000690", "relative_error=0.000687") == []
    assert build.compare(shown.replace("'good'", "'usable'"), shown)
    assert build.compare(shown.replace("khat=0.400", "khat=0.900"), shown)
    assert build.compare("relative_error=0.0123", "relative_error=0.000687")
    assert build.compare("points=17", "points=16")
    assert build.compare("mean: [3.0, 2.97, -0.02]", "mean: [3.0, 2.97, -0.07]")
    assert build.compare("a b c", "a b")
