"""The persistent compilation cache the package switches on (coresets_jax/compilation.py).

Every case runs in a fresh subprocess with its own cache folder under tmp_path, so the suite's own cache
(.jax_cache, set by conftest.py) is never touched.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

REPORT = r"""
import json, os, sys
import jax, jax.numpy as jnp
if os.environ.get("SET_CONFIG_FIRST"):
    jax.config.update("jax_compilation_cache_dir", os.environ["SET_CONFIG_FIRST"])
import coresets_jax as cj
before = cj.compilation_cache()
jax.block_until_ready(jax.jit(lambda x: jnp.sin(x) * 2.0)(jnp.arange(5.0)))
out = {"dir": before, "min_time": jax.config.jax_persistent_cache_min_compile_time_secs}
if len(sys.argv) > 1:  # the cj function: move, then switch off
    moved = cj.compilation_cache(sys.argv[1])
    jax.block_until_ready(jax.jit(lambda x: jnp.cos(x) + 1.0)(jnp.arange(7.0)))
    out["moved"] = moved
    out["off"] = cj.compilation_cache(None)
    jax.block_until_ready(jax.jit(lambda x: jnp.tan(x) - 1.0)(jnp.arange(9.0)))
    out["after_off"] = cj.compilation_cache()
    try:
        cj.compilation_cache(3)
    except ValueError as err:
        out["error"] = str(err)
print(json.dumps(out))
"""


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                        "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "CORESETS_JAX_NO_CACHE")}
    env.update(XDG_CACHE_HOME=str(tmp_path / "xdg"), CORESETS_JAX_PROGRESS="0", **extra)
    return env


def _run(script, env, *args):
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stderr


def _entries(folder: Path, name: str = "") -> list:
    """Cache entries in `folder` (those of programs whose name contains `name`)."""
    if not folder.exists():
        return []
    return [p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".") and name in p.name]


def test_default_cache_in_the_user_cache_folder_and_the_cj_function(tmp_path):
    default = tmp_path / "xdg" / "coresets_jax" / "jax"
    moved = tmp_path / "moved"
    out, _ = _run(REPORT, _env(tmp_path), str(moved))
    assert out["dir"] == str(default) and out["min_time"] == 0.0
    assert len(_entries(default, "lambda")) == 1  # the first program was written there
    assert out["moved"] == str(moved) and len(_entries(moved, "lambda")) == 1  # then the second one went here
    assert out["off"] is None and out["after_off"] is None  # and the third one nowhere
    assert len(_entries(moved, "lambda")) == 1 and len(_entries(default, "lambda")) == 1
    assert "path: expected a folder" in out["error"]


def test_opt_out_and_a_cache_the_user_configured_are_left_alone(tmp_path):
    out, _ = _run(REPORT, _env(tmp_path, CORESETS_JAX_NO_CACHE="1"))
    assert out["dir"] is None and not _entries(tmp_path / "xdg")
    mine = tmp_path / "mine"
    out, _ = _run(REPORT, _env(tmp_path, JAX_COMPILATION_CACHE_DIR=str(mine)))
    assert out["dir"] == str(mine) and out["min_time"] == 1.0  # JAX's own settings, untouched
    assert not _entries(tmp_path / "xdg")
    out, _ = _run(REPORT, _env(tmp_path, SET_CONFIG_FIRST=str(mine)))
    assert out["dir"] == str(mine) and not _entries(tmp_path / "xdg")


WORKLOAD = r"""
import json, warnings
import jax, numpy as np
import coresets_jax as cj
warnings.simplefilter("error", UserWarning)  # a torn cache entry would be a UserWarning from JAX
key = jax.random.key(0)
data = cj.data.synthetic_logistic(key, 300).train
cs = cj.coreset(cj.models.logistic_regression(), data, size=20, method="giga", key=key)
print(json.dumps({"indices": np.asarray(cs.indices).tolist(), "weights": np.asarray(cs.weights).tolist()}))
"""


@pytest.mark.slow
def test_two_processes_fill_one_empty_cache_at_once(tmp_path):
    env = _env(tmp_path, JAX_LOG_COMPILES="0")
    procs = [subprocess.Popen([sys.executable, "-c", WORKLOAD], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env, cwd=ROOT) for _ in range(2)]
    results = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=600)
        assert p.returncode == 0, stderr[-3000:]
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    assert results[0] == results[1]
    entries = _entries(tmp_path / "xdg" / "coresets_jax" / "jax")
    assert len(entries) >= 3
    # A third process reads what the two wrote: the same coreset, no warning (a torn entry would warn).
    third, stderr = _run(WORKLOAD, env)
    assert third == results[0]
    assert "Error reading persistent compilation cache" not in stderr


COUNT = r"""
import json, logging, re
import jax
import coresets_jax as cj
jax.config.update("jax_log_compiles", True)
names = []
class Log(logging.Handler):
    def emit(self, record):
        m = re.search(r"Finished XLA compilation of (.*?) in", record.getMessage())
        if m:
            names.append(m.group(1))
handler = Log()
logger = logging.getLogger("jax._src.dispatch"); logger.addHandler(handler); logger.setLevel(logging.DEBUG)
key = jax.random.key(0)
data = jax.block_until_ready(cj.data.synthetic_logistic(key, 200).train)
model = cj.models.logistic_regression()
names.clear()
cs = cj.coreset(model, data, size=20, method="giga", key=key)
coreset = list(names)
names.clear()
post = cj.sample(model, data, key, weights=cs, num_samples=50, num_warmup=50, warn=False)
print(json.dumps({"coreset": coreset, "sample": list(names)}))
"""


@pytest.mark.slow
def test_first_calls_compile_a_few_whole_programs(tmp_path):
    # Before issue 25 a first cj.coreset (GIGA) compiled 33 programs and a first cj.sample 63, most of them
    # eager operations; now a handful of whole programs (README, "First calls").
    out, _ = _run(COUNT, _env(tmp_path, CORESETS_JAX_NO_CACHE="1"))
    assert len(out["coreset"]) <= 7, out["coreset"]
    assert len(out["sample"]) <= 4, out["sample"]
    assert sum(name == "jit(traced)" for name in out["sample"]) == 1  # one sampler program
