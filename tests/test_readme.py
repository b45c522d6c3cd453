"""README.md stays true: its quickstarts run as written and print what the README shows.

Each script is taken from the README itself (`benchmarks/common.readme_block`), run in a fresh process, and
its stdout compared line by line with the README's "Output" block: the text exactly (method names, verdicts,
shapes), the numbers within a tolerance wide enough for another CPU's rounding of an MCMC run and narrow
enough to catch a changed result, and wall-clock times not at all.
"""

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import common  # noqa: E402

NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
TIME = re.compile(r"(wall_time|time)=[\d.]+s")


def _split(line: str):
    line = TIME.sub(r"\1=<t>", line.strip())
    return NUMBER.sub("#", line), [float(x) for x in NUMBER.findall(line)]


def _check_output(printed: str, shown: str, rtol: float = 0.25, atol: float = 0.02):
    printed = [line for line in printed.splitlines() if line.strip()]
    shown = [line for line in shown.splitlines() if line.strip()]
    assert len(printed) == len(shown), (printed, shown)
    for got, want in zip(printed, shown):
        (got_text, got_nums), (want_text, want_nums) = _split(got), _split(want)
        assert got_text == want_text, (got, want)
        for g, w in zip(got_nums, want_nums):
            assert abs(g - w) <= atol + rtol * abs(w), (got, want)


def _run(heading: str, tmp_path) -> str:
    script = common.readme_block(heading)
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True,
                         timeout=900, env=dict(os.environ, CORESETS_JAX_PROGRESS="0"))
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.mark.parametrize("heading", ["## Quickstart: a JAX model", "## Quickstart: a NumPyro model"])
def test_the_quickstart_prints_what_the_readme_shows(heading, tmp_path):
    _check_output(_run(heading, tmp_path), common.readme_block(heading, language=""))


def test_the_output_check_can_fail():
    shown = "Certificate(verdict='good', khat=0.400, kl=7.66e-06 ± 9.6e-07, ess=1000 of 1000, time=0.24s)"
    _check_output(shown.replace("0.24s", "9.1s"), shown)  # times are not compared
    with pytest.raises(AssertionError):
        _check_output(shown.replace("'good'", "'usable'"), shown)
    with pytest.raises(AssertionError):
        _check_output(shown.replace("khat=0.400", "khat=0.700"), shown)
