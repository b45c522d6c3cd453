"""Shared set-up of the paper benchmarks: environment record, timing, batched-trial speed-up, JSON and PNG.

Every benchmark script has `main(argv=None, *, quick=None, out_dir=None) -> dict` so a test can run its
quick mode in-process, and writes `<out_dir>/<stem>.json` and `<out_dir>/<stem>.png`.

Timing rules (shared/notes.md): the first call of a jitted function is reported as `compile_s` (trace,
compile and one run); later calls are timed with `block_until_ready` and summarised by their median.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from typing import Any, Callable, NamedTuple, Optional, Sequence

import jax
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
DATA_DIR = os.environ.get("CORESETS_DATA", os.path.join(os.path.dirname(HERE), "..", "shared", "data"))


def data_path(name: str) -> Optional[str]:
    """Path of a dataset file in the shared data folder ($CORESETS_DATA), or None when it is absent."""
    path = os.path.join(DATA_DIR, name)
    return os.path.abspath(path) if os.path.exists(path) else None


def readme_block(heading: str, language: str = "python", index: int = 0) -> str:
    """The `index`-th fenced ```language block under the README.md section `heading` (e.g. "## Quickstart:
    a JAX model"), so that scripts measure and tests check the README's own code, never a copy of it."""
    text = open(os.path.join(os.path.dirname(HERE), "README.md"), encoding="utf-8").read()
    start = text.index(heading + "\n")
    end = text.find("\n## ", start + len(heading))
    blocks, current = [], None
    for line in text[start:end if end >= 0 else len(text)].splitlines(keepends=True):
        if current is None and line.startswith("```"):
            current = [] if line.strip() == "```" + language else False  # False: a block of another language
        elif current is not None and line.strip() == "```":
            if current is not False:
                blocks.append("".join(current))
            current = None
        elif isinstance(current, list):
            current.append(line)
    if len(blocks) <= index:
        raise ValueError(f"README.md: section {heading!r} has {len(blocks)} ```{language} block(s)")
    return blocks[index]


def parser(doc: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    p.add_argument("--quick", action="store_true", help="a seconds-long smoke run (CI)")
    p.add_argument("--trials", type=int, default=None, help="override the number of trials")
    p.add_argument("--out", default=RESULTS, help="output folder for JSON and PNG")
    return p


def cpu_model() -> str:
    """The processor's model name (Linux), so that runs on different machines can be told apart."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def environment() -> dict:
    """Device and software record written into every result file."""
    commit = os.environ.get("BENCH_GIT_COMMIT", "")  # a copy of the tree without .git (a lent GPU machine)
    try:
        commit = commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
                                text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    dev = jax.devices()[0]
    return {"jax": jax.__version__, "numpy": np.__version__, "backend": jax.default_backend(),
            "device": str(dev), "device_kind": getattr(dev, "device_kind", ""),
            "device_count": jax.device_count(), "cpu_count": os.cpu_count(), "cpu_model": cpu_model(),
            "platform": platform.platform(), "python": platform.python_version(),
            "x64": bool(jax.config.jax_enable_x64), "git_commit": commit,
            "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            # BENCH_MACHINE_NOTE: what the defaults cannot tell, e.g. a lent GPU machine's host CPU alone
            "note": os.environ.get("BENCH_MACHINE_NOTE") or (
                     f"shared {os.cpu_count()}-core CPU (several users); timings vary by +-20% run to run"
                     if jax.default_backend() == "cpu" else
                     f"one {getattr(dev, 'device_kind', jax.default_backend())} on a lent machine with "
                     f"{os.cpu_count()} CPU cores, used by this run alone")}


def block(tree: Any) -> Any:
    return jax.tree_util.tree_map(lambda a: a.block_until_ready() if hasattr(a, "block_until_ready") else a,
                                  tree)


def time_fn(fn: Callable, *args, repeats: int = 3, slow_s: Optional[float] = None) -> dict:
    """{"compile_s": first call (trace + compile + run), "median_s": median of `repeats` later calls}.

    With `slow_s`, a first call longer than that is followed by one timed call only (a slow case would
    otherwise take most of a run's time)."""
    t0 = time.perf_counter()
    out = block(fn(*args))
    first = time.perf_counter() - t0
    if slow_s is not None and first > slow_s:
        repeats = min(repeats, 1)
    runs = []
    for _ in range(max(repeats, 0)):
        t0 = time.perf_counter()
        block(fn(*args))
        runs.append(time.perf_counter() - t0)
    return {"compile_s": first, "median_s": float(np.median(runs)) if runs else first, "runs_s": runs,
            "output": out}


def batched_speedup(trial: Callable, keys: jax.Array, *args, repeats: int = 2) -> dict:
    """Time B trials as one `jit(vmap(trial))` call against a Python loop over `jit(trial)`, both compiled.

    `trial(key, *args)` must be a pure function of the key. Returns seconds per batch for both and the
    ratio loop / batched (> 1 means batching is faster), plus the batched outputs.
    """
    single = jax.jit(trial)
    batched = jax.jit(jax.vmap(trial, in_axes=(0,) + (None,) * len(args)))
    b = time_fn(batched, keys, *args, repeats=repeats)
    loop = time_fn(lambda ks, *a: [single(k, *a) for k in ks], list(keys), *args, repeats=repeats)
    return {"batch": int(keys.shape[0]), "batched_s": b["median_s"], "loop_s": loop["median_s"],
            "batched_compile_s": b["compile_s"], "loop_compile_s": loop["compile_s"],
            "speedup": loop["median_s"] / b["median_s"], "output": b["output"]}


def alternate(variants: dict, repeats: int, *, runs: bool = False) -> dict:
    """Median seconds of each zero-argument variant, after one warm-up call each, run in alternation so
    that a change of load on a shared machine hits all of them alike (notes.md: compare side by side).

    With `runs=True`, each variant's list of `repeats` seconds instead, in the order they ran, for paired
    quantities (the difference or ratio of two variants timed in the same round)."""
    for fn in variants.values():
        block(fn())
    times = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            t0 = time.perf_counter()
            block(fn())
            times[name].append(time.perf_counter() - t0)
    if runs:
        return times
    return {name: float(np.median(ts)) for name, ts in times.items()}


def alternating_children(code: str, cells: Sequence[str], variants: Sequence[str], repeats: int, *args,
                         describe: Optional[Callable[[dict], str]] = None) -> dict:
    """`child(code, cell, variant, *args)` for every cell and variant, `repeats` rounds, the variants' order
    reversed every other round (so a change of load hits them alike); {cell: {variant: [results]}}. Each
    result needs `first_s` and `second_s`; `describe(result)` adds to the progress line."""
    runs = {c: {v: [] for v in variants} for c in cells}
    for rep in range(repeats):
        for c in cells:
            for v in (list(variants) if rep % 2 == 0 else list(variants)[::-1]):
                r = child(code, c, v, *args)
                runs[c][v].append(r)
                print(f"{c:<22} {v:<10} first {r['first_s']:6.2f} s  second {r['second_s']:6.3f} s  "
                      + (describe(r) if describe else ""), flush=True)
    return runs


def first_second_medians(cell_runs: dict) -> dict:
    """{variant: {"first_s": median, "second_s": median}} of one cell's `alternating_children` results."""
    return {v: {k: float(np.median([r[k] for r in rs])) for k in ("first_s", "second_s")}
            for v, rs in cell_runs.items()}


def mean_shift_sd(a: dict, b: dict) -> float:
    """The largest |difference| of two results' posterior means ("mean"), in the first one's sd ("sd")."""
    return max(abs(x - y) / s for x, y, s in zip(a["mean"], b["mean"], a["sd"]))


def child(code: str, *args, devices: int = 1, env: Optional[dict] = None,
          timeout: Optional[float] = None) -> dict:
    """Run `code` in a fresh Python process and return the JSON object of its last stdout line that starts
    with "JSON" (first calls, peak memory and forced devices need a process of their own).

    The child imports this checkout's `coresets_jax` and this folder's modules (`import common`); its progress
    bars are off and its stderr goes to ours. `devices` > 1 forces that many CPU devices (they share the
    machine's cores: a code path, not a speed-up)."""
    env = dict(os.environ, **(env or {}))
    env.setdefault("CORESETS_JAX_PROGRESS", "0")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(HERE), HERE, env.get("PYTHONPATH")) if p)
    if devices > 1:
        env["JAX_PLATFORMS"] = "cpu"
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}".strip()
    proc = subprocess.run([sys.executable, "-c", code, *map(str, args)], stdout=subprocess.PIPE, text=True,
                          env=env, timeout=timeout, cwd=os.path.dirname(HERE))
    if proc.returncode != 0:
        raise RuntimeError(f"child process failed with exit status {proc.returncode} (its stderr is above)")
    return json.loads([line for line in proc.stdout.splitlines() if line.startswith("JSON")][-1][4:])


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MB (VmHWM, Linux). Not ru_maxrss: it survives exec, so a fresh
    child would report its parent's peak when that was larger."""
    with open("/proc/self/status") as f:
        return [int(line.split()[1]) for line in f if line.startswith("VmHWM")][0] / 1024


def summary(values: Sequence[float]) -> dict:
    v = np.asarray(values, dtype=np.float64)
    return {"median": float(np.median(v)), "q25": float(np.percentile(v, 25)),
            "q75": float(np.percentile(v, 75)), "mean": float(np.mean(v)), "n": int(v.size)}


def jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items() if k != "output"}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.ndarray, jax.Array)):
        return jsonable(np.asarray(x).tolist())
    if isinstance(x, (np.floating, float)):
        x = float(x)
        return x if np.isfinite(x) else None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.bool_,)):
        return bool(x)
    return x


def write_json(result: dict, out_dir: str, stem: str) -> str:
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{stem}.json")
    text = json.dumps(jsonable(result), indent=1, allow_nan=False)  # fails before the file is touched
    try:
        from coresets_jax.interop.io import atomic_write
    except ImportError:  # an older checkout of the package (investigations/bad_inputs_table.py runs on one)
        with open(path, "w") as f:
            f.write(text)
    else:
        atomic_write(path, lambda f: f.write(text.encode()))
    return path


def write_table(result: dict, rows: list, summarise: Callable, markdown: Callable, out_dir: str, stem: str) -> dict:
    """The end of a resumable table benchmark: `result` gains `summarise(rows)` as its table and that table as
    markdown; written as JSON, and the markdown printed."""
    result["table"] = summarise(rows)
    result["table_markdown"] = markdown(result["table"])
    write_json(result, out_dir, stem)
    print(result["table_markdown"])
    return result


def figure(nrows: int, ncols: int, size=(5.0, 4.0)):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(nrows, ncols, figsize=(size[0] * ncols, size[1] * nrows), squeeze=False)
    return fig, axes


def grouped_bars(ax, labels: Sequence[str], series: dict, ylabel: str, title: str) -> None:
    """Side-by-side bars on `ax`: one group per label, one bar per entry of `series` (name -> values)."""
    width = 0.76 / max(len(series), 1)
    for i, (name, values) in enumerate(series.items()):
        ax.bar([j + width * i for j in range(len(labels))], values, width, label=name)
    ax.set_xticks([j + width * (len(series) - 1) / 2 for j in range(len(labels))], labels, rotation=35,
                  ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)


def save_figure(fig, out_dir: str, stem: str) -> str:
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{stem}.png")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def stem(name: str, quick: bool) -> str:
    return f"{name}_quick" if quick else name


def resolve(argv, quick, out_dir, doc: str, extra: Callable[[argparse.ArgumentParser], None] = None):
    """Parse argv, letting keyword arguments of `main` override it (tests call main(quick=True, out_dir=...)).

    A quick run also turns on `jax_disable_most_optimizations` (see `fast_compile`); the caller restores it
    (tests/test_benchmarks_quick.py does)."""
    p = parser(doc)
    if extra is not None:
        extra(p)
    args = p.parse_args([] if argv is None and (quick is not None or out_dir is not None) else argv)
    if quick is not None:
        args.quick = quick
    if out_dir is not None:
        args.out = out_dir
    if args.quick:
        fast_compile(True)
    return args


def fast_compile(enabled: bool) -> bool:
    """Set `jax_disable_most_optimizations` (XLA backend optimisation level 0, no expensive LLVM passes) and
    return the previous value. Quick runs are tiny, so their time is XLA compilation, which this halves on
    the project's CPU (gaussian.py --quick: 25.7 s to 12.2 s of compile CPU); run times of the tiny quick
    workloads are not reported as results. Full runs keep the default optimisation."""
    old = bool(jax.config.read("jax_disable_most_optimizations"))
    jax.config.update("jax_disable_most_optimizations", bool(enabled))
    return old


def solver_fn(method: str, size: int, **options) -> Callable:
    """A pure `(V, key) -> (indices, weights)` for batched trials, from the public pure core `cj.build_fn`."""
    import coresets_jax as cj

    solve = cj.build_fn(method, size, **options)

    def pure(V, key):
        cs = solve(V, key)
        return cs.indices, cs.weights
    return pure


class LogisticProblem(NamedTuple):
    """The shared set-up: model, train and test data, the Laplace pi_hat and the projected vectors V."""

    model: Any
    train: Any
    test: Any
    pi_hat: Any
    V: Any


def logistic_problem(n: int, num_features: int = 500, norm: str = "centered", *, data_key, theta_key,
                     pihat_key=None, proj_key=None, num_test: int = 0, dtype=None) -> LogisticProblem:
    """HC §7.2 synthetic logistic regression (x ~ N(0, I_2), theta = [3, 3, 0]) -> Laplace pi_hat ->
    `num_features` draws -> `cj.project` with `norm` (V blocked until ready).

    Every key is the caller's, so each script keeps the draws of its committed results."""
    import coresets_jax as cj

    ds = cj.data.synthetic_logistic(data_key, n, num_test=num_test)
    model = cj.models.logistic_regression()
    pi_hat = cj.laplace(model, ds.train, key=pihat_key)
    V = cj.project(model, ds.train, pi_hat.sample(theta_key, num_features), norm=norm, key=proj_key,
                   dtype=dtype)
    return LogisticProblem(model, ds.train, ds.test, pi_hat, V.block_until_ready())


def dense(indices: jax.Array, weights: jax.Array, n: int) -> jax.Array:
    """The (N,) weight vector of a fixed-capacity coreset (traceable)."""
    import jax.numpy as jnp

    return jnp.zeros(n, weights.dtype).at[indices].add(weights)
