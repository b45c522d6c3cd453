"""benchmarks/high_dim.py: its moment KL against the exact Gaussian KL, its data, its verdicts of where a method
loses, and its quick mode."""

import importlib.util
import json
import math
import os
import sys

import jax
import numpy as np
import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def _load():
    sys.path.insert(0, BENCH)
    spec = importlib.util.spec_from_file_location("bench_high_dim", os.path.join(BENCH, "high_dim.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _gaussian_kl(mq, cq, mp, cp):
    d = len(mq)
    ip = np.linalg.inv(cp)
    return 0.5 * (np.trace(ip @ cq) - d + (mp - mq) @ ip @ (mp - mq)
                  + np.linalg.slogdet(cp)[1] - np.linalg.slogdet(cq)[1])


@pytest.mark.parametrize("d", [20, 60])
def test_moment_kl_removes_the_bias_of_estimated_covariances(d):
    """Draws from two known Gaussians: the plain plug-in KL is biased up by about D^2 (1/n_p + 1/n_q) / 4;
    moment_kl is within its noise of the exact KL (averaged over repeats)."""
    hd = _load()
    rng = np.random.default_rng(d)
    a = rng.normal(size=(d, d)) / np.sqrt(d)
    cp = a @ a.T + np.eye(d)
    cq = cp * 1.1
    mp, mq = np.zeros(d), 0.05 * rng.normal(size=d)
    exact = _gaussian_kl(mq, cq, mp, cp)
    got, plain = [], []
    for _ in range(20):
        p = rng.multivariate_normal(mp, cp, 3000)
        q = rng.multivariate_normal(mq, cq, 4000)
        got.append(hd.moment_kl(q, p))
        plain.append(_gaussian_kl(q.mean(0), np.cov(q, rowvar=False), p.mean(0), np.cov(p, rowvar=False)))
    bias = d * d * (1 / 3000 + 1 / 4000) / 4
    assert np.mean(plain) - exact > 0.5 * bias  # the plug-in is biased
    assert abs(np.mean(got) - exact) < 0.15 * bias + 3 * np.std(got) / np.sqrt(20)


def test_the_problems_have_the_stated_shapes_and_rare_features():
    hd = _load()
    X, y = hd.make_data("logistic", 50, 2000)
    assert X.shape == (2000, 50) and np.all(X[:, 0] == 1) and set(np.unique(y)) <= {0.0, 1.0}
    assert abs(np.corrcoef(X[:, 5], X[:, 6])[0, 1] - 0.5) < 0.1  # AR(1) covariates
    X, y = hd.make_data("rare", 31, 20000)
    rare = X[:, -10:]
    assert set(np.unique(rare)) == {0.0, 1.0} and abs(rare.mean() - 0.01) < 0.003
    X, y = hd.make_data("softmax", 50, 1000)
    assert X.shape == (1000, 25) and set(np.unique(y)) <= {0, 1, 2}
    X, y = hd.make_data("poisson", 25, 1000)
    assert np.all(y >= 0) and np.all(y == np.round(y))


def test_losses_name_what_is_slower_or_off():
    hd = _load()
    log = {"compile_s": 1.0}
    cell = {"problem": "logistic", "D_requested": 50, "N": 10, "reference": {"label": "nuts", "chain_z": 0.1},
            "runs": {"nuts": {"seconds": 100.0, "log": log, "info": {}, "score": {"max_z": 0.1, "sd_ratio_max": 0.0}},
                     "sgld": {"seconds": 10.0, "log": log, "info": {}, "score": {"max_z": 0.5, "sd_ratio_max": 0.5}},
                     "ours": {"seconds": 200.0, "log": log, "info": {"verdict": "good"},
                              "score": {"max_z": 0.15, "sd_ratio_max": 0.05}}}}
    lose = hd.losses(cell)
    assert lose["nuts"] == "-"
    assert "means off" in lose["sgld"] and "sds off" in lose["sgld"] and "slower" not in lose["sgld"]
    assert lose["ours"].startswith("slower than NUTS") and "means off" not in lose["ours"]


@pytest.mark.slow
@pytest.mark.bench
def test_quick_mode_runs_and_writes_json(tmp_path):
    hd = _load()
    old = bool(jax.config.read("jax_disable_most_optimizations"))
    try:
        hd.main(quick=True, out_dir=str(tmp_path))
    finally:
        jax.config.update("jax_disable_most_optimizations", old)
    with open(tmp_path / "high_dim_quick.json") as f:
        data = json.load(f)
    assert data["quick"] is True and data["environment"]["jax"]
    assert (tmp_path / "high_dim_quick.png").stat().st_size > 1000
    (cell,) = data["summary"]
    for name, entry in cell["contenders"].items():
        assert "error" not in entry, (name, entry)
        assert entry["cold_s"] > 0 and math.isfinite(entry["max_z"])
    assert cell["contenders"]["ours"]["features"] == "taylor"
