"""benchmarks/vs_peers.py (issue 36): its scores and summaries, its quick mode, and the NumPyro route it found
broken (a Laplace fit of a NumPyro logistic model that stopped at its zero start)."""

import importlib.util
import json
import math
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")
numpyro = pytest.importorskip("numpyro")
dist = numpyro.distributions


def _load():
    sys.path.insert(0, BENCH)
    spec = importlib.util.spec_from_file_location("bench_vs_peers", os.path.join(BENCH, "vs_peers.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _logreg(X, y=None):
    beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
    with numpyro.plate("data", X.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)


def test_laplace_of_a_numpyro_logistic_model_finds_the_mode():
    # At theta = 0 every logit is exactly 0, where JAX differentiates NumPyro's Bernoulli(logits) log-density
    # as y instead of y - 1/2; the fit used to stop there (mean 0) and report convergence.
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.standard_normal((2000, 3)), np.ones((2000, 1))], 1).astype(np.float32)
    y = (rng.random(2000) < 1 / (1 + np.exp(-(X @ np.array([0.9, -0.8, 0.3, -2.6]))))).astype(np.float32)
    model, data = cj.from_numpyro(_logreg, jnp.asarray(X), y=jnp.asarray(y))
    assert np.all(np.asarray(model.init_params(data)) != 0) and np.max(np.abs(model.init_params(data))) < 1e-2
    fit = cj.laplace(model, data)
    builtin = cj.laplace(cj.models.logistic_regression(), (jnp.asarray(X), jnp.asarray(2 * y - 1)))
    np.testing.assert_allclose(fit.mean, builtin.mean, atol=1e-4)
    np.testing.assert_allclose(fit.cov, builtin.cov, rtol=1e-3, atol=1e-7)
    assert fit.info["grad_norm"] < 1e-2


def test_data_is_deterministic_and_shaped():
    vp = _load()
    X, y, theta = vp.make_data("logistic", 5, 300)
    X2, y2, _ = vp.make_data("logistic", 5, 300)
    assert X.shape == (300, 5) and X.dtype == np.float32 and np.all(X[:, -1] == 1)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    assert set(np.unique(y)) <= {0.0, 1.0}
    Xp, yp, _ = vp.make_data("poisson", 5, 300)
    assert np.all(yp >= 0) and np.all(yp == np.round(yp))


def test_scores_against_a_reference():
    vp = _load()
    rng = np.random.default_rng(1)
    ref_draws = rng.standard_normal((2, 400, 3))
    ref = vp.reference_from(ref_draws, "nuts")
    chain_z = np.max(np.abs(ref_draws[0].mean(0) - ref_draws[1].mean(0)) / ref_draws.reshape(-1, 3).std(0))
    assert ref["chain_z"] == pytest.approx(chain_z)
    same = vp.score(rng.standard_normal((2, 400, 3)), ref)
    shifted = vp.score(rng.standard_normal((2, 400, 3)) + np.array([0.0, 1.0, 0.0]), ref)
    assert same["max_z"] < 0.3 and 0.5 < same["w1_floor"] < 2.0
    assert shifted["max_z"] == pytest.approx(1.0, abs=0.2) and shifted["w1_floor"] > 1.5


def test_break_even_and_targets_from_a_summary():
    vp = _load()

    def cell(n, nuts_s, ours_s, ours_z=0.1):
        run = lambda s, z: {"calls": [{"seconds": s, "info": {}, "log": {"compile_s": 1.0}}],  # noqa: E731
                            "import_s": 1.0, "peak_rss_mb": 1.0, "score": {"max_z": z, "w1_floor": 1.0}}
        return {"model": "logistic10", "kind": "logistic", "D": 10, "N": n, "skipped": {},
                "reference": {"label": "nuts", "chain_z": 0.1},
                "runs": {"nuts": [run(nuts_s, 0.1)], "ours_fixed": [run(ours_s, ours_z)]}}

    result = {"cells": [cell(100_000, 10.0, 40.0), cell(500_000, 60.0, 50.0), cell(1_000_000, 120.0, 5.0, 0.3)]}
    be = vp.break_even(result)["logistic10"]
    assert 100_000 < be["crossing_N"] < 500_000 and not be["ours_faster_everywhere"]
    rows = {r["N"]: r for r in vp.targets(result)}
    assert rows[500_000]["over_nuts"] == pytest.approx(50 / 60) and not rows[500_000]["over_nuts_met"]
    assert rows[1_000_000]["over_nuts_target"] == 0.05 and rows[1_000_000]["over_nuts_met"]
    assert rows[1_000_000]["z_met"] is False and rows[500_000]["z_met"] is True
    assert "| logistic10 | 5e+05 | ours_fixed | 50.0 |" in vp.markdown(result)


def test_reference_falls_back_to_nuts_with_jit_args_and_else_stays_unscored(tmp_path):
    vp = _load()
    rng = np.random.default_rng(2)
    run = lambda draws: {"calls": [{"seconds": 5.0, "info": {}, "log": {"compile_s": 1.0}}],  # noqa: E731
                         "import_s": 1.0, "peak_rss_mb": 1.0, "draws": draws}
    timeout = {"error": "its process did not finish within 120 s", "wall_s": 120.0}
    scored = {"model": "logistic10", "kind": "logistic", "D": 10, "N": 1000, "skipped": {},
              "runs": {"nuts": [timeout], "nuts_jit_args": [run(rng.standard_normal((2, 400, 3)))],
                       "ours_fixed": [run(rng.standard_normal((2, 400, 3)) + np.array([0.0, 0.0, 1.0]))]}}
    vp._score_cell(scored, str(tmp_path), {}, 40.0, long_reference=False)
    assert scored["reference"]["label"] == "nuts_jit_args"
    assert scored["runs"]["nuts_jit_args"][0]["score"]["note"] == "chain against chain"
    assert scored["runs"]["ours_fixed"][0]["score"]["max_z"] == pytest.approx(1.0, abs=0.2)
    unscored = {"model": "logistic10", "kind": "logistic", "D": 10, "N": 2000, "skipped": {},
                "runs": {"nuts": [timeout], "ours_fixed": [run(rng.standard_normal((2, 400, 3)))]}}
    vp._score_cell(unscored, str(tmp_path), {}, 40.0, long_reference=False)  # would run hmcecs_long otherwise
    assert unscored["reference"] is None and "draws" not in unscored["runs"]["ours_fixed"][0]
    table = vp.markdown({"cells": [scored, unscored]})
    assert "| logistic10 | 2e+03 | nuts | error | | | | | | its process did not finish within 120 s |" in table
    assert "| none |" in table and "nuts_jit_args (chain z" in table
    # a merge of runs made on one lent GPU keeps that machine's record, not the merging machine's
    env = {"backend": "gpu", "device_kind": "NVIDIA H100", "jax": "0.11.2"}
    for i, cell in enumerate((scored, unscored)):
        with open(tmp_path / f"part{i}.json", "w") as f:
            json.dump({"cells": [cell], "settings": {}, "environment": env}, f, default=np.ndarray.tolist)
    merged = vp.main(["--merge", str(tmp_path / "part0.json"), str(tmp_path / "part1.json"), "--tag", "m",
                      "--out", str(tmp_path)])
    assert merged["environment"] == env and [c["N"] for c in merged["cells"]] == [1000, 2000]


@pytest.mark.slow
@pytest.mark.bench
def test_quick_mode_runs_every_default_contender_and_writes_json(tmp_path):
    vp = _load()
    old = bool(jax.config.read("jax_disable_most_optimizations"))
    try:
        vp.main(quick=True, out_dir=str(tmp_path))
    finally:
        jax.config.update("jax_disable_most_optimizations", old)
    with open(tmp_path / "vs_peers_quick.json") as f:
        data = json.load(f)
    assert data["quick"] is True and data["environment"]["jax"]
    assert (tmp_path / "vs_peers_quick.png").stat().st_size > 1000
    (cell,) = data["summary"]
    assert set(cell["contenders"]) == set(vp.QUICK_CONTENDERS)
    for name, entry in cell["contenders"].items():
        assert "error" not in entry, (name, entry)
        assert entry["cold_s"] > 0 and math.isfinite(entry["max_z"]) and entry["w1_floor"] > 0
    ours = cell["contenders"]["ours_fixed"]
    assert ours["verdict"] in ("good", "usable") and ours["max_z"] < 0.5
    assert "| logistic3 | 2e+03 | ours_fixed |" in data["table_markdown"]
