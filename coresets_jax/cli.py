"""`coresets-jax run [CONFIG.yaml] [--out DIR]`: the main job.

With no config it runs HC §7.2's synthetic logistic regression (N = 10,000, theta = [3, 3, 0]): Laplace pi_hat,
Fisher projection with J = 500, and Frank–Wolfe coresets for M in {10, 100, 1000} against uniform
subsampling, printing size, construction time and relative vector-sum error.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from typing import Any

import jax
import yaml

from .core import validate as _validate
from .construct import build, coreset, relative_error
from .registry import methods as _methods, resolve
from .data import load_npz, synthetic_logistic, synthetic_poisson
from .models import logistic_regression, poisson_regression
from .pihat import laplace
from .projection import NORMS, project

DEFAULTS: dict[str, Any] = {
    "model": "logistic_regression",
    "prior_scale": 1.0,
    "data": {"synthetic": "logistic", "n": 10_000, "seed": 0},
    "norm": "fisher",
    "num_features": 500,
    "method": "frank_wolfe",
    "baseline": "uniform",
    "sizes": [10, 100, 1000],
    "repeats": 3,
    "seed": 0,
}

MODELS = {"logistic_regression": logistic_regression, "poisson_regression": poisson_regression}
SYNTHETIC = {"logistic": synthetic_logistic, "poisson": synthetic_poisson}


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load_config(path: str | None) -> tuple[dict, str]:
    """Merge a YAML file over DEFAULTS; relative data paths resolve against the config's folder."""
    config = json.loads(json.dumps(DEFAULTS))
    base = os.getcwd()
    if path is not None:
        if not os.path.exists(path):
            raise ValueError(f"config: no such file {path!r}")
        with open(path) as f:
            user = yaml.safe_load(f) or {}
        if not isinstance(user, dict):
            raise ValueError(f"config: {path!r} must hold a mapping at the top level")
        unknown = sorted(set(user) - set(DEFAULTS))
        if unknown:
            raise ValueError(f"config: unknown key(s) {unknown}; known keys are {sorted(DEFAULTS)}")
        config.update(user)
        base = os.path.dirname(os.path.abspath(path))
    _validate.check_choice(config["model"], MODELS, "config.model")
    _validate.check_choice(config["norm"], NORMS, "config.norm")
    _validate.check_choice(config["method"], _methods(), "config.method")
    _validate.check_choice(config["baseline"], _methods(), "config.baseline")
    data = config["data"]
    if not isinstance(data, dict) or ("path" in data) == ("synthetic" in data):
        raise ValueError("config.data: give either {path: FILE.npz} or {synthetic: logistic|poisson, n: N}")
    if "path" in data and not os.path.isabs(data["path"]):
        data["path"] = os.path.normpath(os.path.join(base, data["path"]))
    if not config["sizes"] or not all(isinstance(m, int) and m >= 1 for m in config["sizes"]):
        raise ValueError(f"config.sizes: expected a list of positive integers, got {config['sizes']!r}")
    return config, base


def _load_data(spec: dict):
    if "path" in spec:
        return load_npz(spec["path"])
    _validate.check_choice(spec["synthetic"], SYNTHETIC, "config.data.synthetic")
    return SYNTHETIC[spec["synthetic"]](jax.random.key(int(spec.get("seed", 0))), int(spec.get("n", 10_000)))


def _construct(method, size, model, data, approx, V, key):
    """One coreset by name: vector methods on V (`cj.build`), posterior-driven ones on the model
    (`cj.coreset`, started from the same pi_hat), as the method's registry entry declares."""
    if resolve(method).needs == "posterior":
        return coreset(model, data, size, method, key, pi_hat=approx)
    return build(V, size, method, key)


def _timed_build(construct, repeats):
    """(coreset, first-call seconds including compilation, median seconds of later calls)."""
    start = time.perf_counter()
    cs = construct()
    cs.weights.block_until_ready()
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        construct().weights.block_until_ready()
        times.append(time.perf_counter() - start)
    return cs, first, statistics.median(times) if times else first


def run_job(config: dict) -> dict:
    key_pi, key_theta, key_proj, key_solve = jax.random.split(jax.random.key(int(config["seed"])), 4)
    model = MODELS[config["model"]](prior_scale=float(config["prior_scale"]))
    dataset = _load_data(config["data"])
    data = dataset.train
    n = data[0].shape[0]
    for m in config["sizes"]:
        _validate.check_size(m, n, "config.sizes")
    stages = {}
    _log(f"[1/3] Laplace approximation on N = {n} rows ({config['model']})")
    start = time.perf_counter()
    approx = laplace(model, data, key=key_pi)
    stages["laplace_s"] = time.perf_counter() - start
    _log(f"[2/3] {config['norm']} projection to J = {config['num_features']}")
    start = time.perf_counter()
    thetas = approx.sample(key_theta, int(config["num_features"]))
    V = project(model, data, thetas, norm=config["norm"], key=key_proj)
    V.block_until_ready()
    stages["projection_s"] = time.perf_counter() - start
    rows = []
    methods = [config["method"]] + ([config["baseline"]] if config["baseline"] != config["method"] else [])
    for i, m in enumerate(config["sizes"]):
        _log(f"[3/3] coresets of size M = {m} ({i + 1}/{len(config['sizes'])})")
        for method in methods:
            cs, first, median = _timed_build(
                lambda: _construct(method, m, model, data, approx, V, key_solve), int(config["repeats"]))
            rows.append({"method": method, "size": m, "num_points": cs.num_points,
                         "time_s": median, "first_call_s": first,
                         "relative_error": float(relative_error(V, cs))})
    return {
        "config": config,
        "n": n,
        "laplace_mean": [float(x) for x in approx.mean],
        "stages": stages,
        "results": rows,
        "environment": {"jax": jax.__version__, "backend": jax.default_backend(),
                        "devices": [str(d) for d in jax.devices()], "python": platform.python_version()},
    }


def format_table(report: dict) -> str:
    lines = [f"{'method':<14}{'M':>7}{'points':>8}{'time (s)':>11}{'1st call (s)':>14}{'rel. error':>12}"]
    for r in report["results"]:
        lines.append(f"{r['method']:<14}{r['size']:>7}{r['num_points']:>8}{r['time_s']:>11.4f}"
                     f"{r['first_call_s']:>14.3f}{r['relative_error']:>12.4g}")
    s = report["stages"]
    lines.append(f"N = {report['n']}; Laplace {s['laplace_s']:.2f} s; projection {s['projection_s']:.2f} s; "
                 "time = median of repeated calls after compilation; "
                 "rel. error = ||sum v - V^T w|| / ||sum v||")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="coresets-jax", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="run the main job (built-in synthetic data without a config)")
    run_p.add_argument("config", nargs="?", help="YAML config (see configs/)")
    run_p.add_argument("--out", help="folder for results.json")
    args = parser.parse_args(argv)
    try:
        config, _ = load_config(args.config)
        report = run_job(config)
    except ValueError as err:
        print(f"coresets-jax: error: {err}", file=sys.stderr)
        return 2
    print(format_table(report))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, "results.json")
        with open(path, "w") as f:
            json.dump(report, f, indent=2)
        _log(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
