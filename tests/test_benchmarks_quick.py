"""Every paper benchmark runs in --quick mode in-process and writes valid JSON (and a PNG).

The quick modes are tiny (a few trials, one or two sizes); their cost is mostly XLA compilation of the
batched trial functions, so they are marked slow.
"""

import ast
import importlib.util
import json
import math
import os
import sys

import pytest

pytestmark = pytest.mark.bench

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


def _load(name):
    sys.path.insert(0, BENCH)
    spec = importlib.util.spec_from_file_location(f"bench_{name}", os.path.join(BENCH, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _finite_numbers(tree):
    if isinstance(tree, dict):
        for v in tree.values():
            yield from _finite_numbers(v)
    elif isinstance(tree, list):
        for v in tree:
            yield from _finite_numbers(v)
    elif isinstance(tree, (int, float)) and not isinstance(tree, bool):
        yield tree


def _check(name, tmp_path, required):
    import jax

    old = bool(jax.config.read("jax_disable_most_optimizations"))
    try:  # quick runs compile with most XLA optimisations off (common.fast_compile); restored for later tests
        res = _load(name).main(quick=True, out_dir=str(tmp_path))
    finally:
        jax.config.update("jax_disable_most_optimizations", old)
    stem = f"{name}_quick"
    with open(tmp_path / f"{stem}.json") as f:
        data = json.load(f)  # valid JSON (NaN/inf are written as null, never as bare tokens)
    assert data["quick"] is True
    assert (tmp_path / f"{stem}.png").stat().st_size > 1000
    for key in required:
        assert key in data, key
    assert "environment" in data and data["environment"]["jax"]
    nums = list(_finite_numbers(data))
    assert nums and all(math.isfinite(x) for x in nums)
    for sp in data["batched_speedup"].values():
        assert sp["batched_s"] > 0 and sp["loop_s"] > 0 and sp["speedup"] > 0
    return res, data


def test_every_benchmark_is_on_the_common_harness():
    # Issue 23: every program in benchmarks/ and benchmarks/investigations/ has main(argv, *, quick, out_dir)
    # (so that its quick mode runs in-process) and writes its JSON, with the environment record, through
    # common.py.
    for folder in (BENCH, os.path.join(BENCH, "investigations")):
        for name in sorted(f for f in os.listdir(folder) if f.endswith(".py")):
            with open(os.path.join(folder, name)) as f:
                source = f.read()
            if 'if __name__ == "__main__":' not in source:
                continue  # a helper (common.py, numpy_reference.py)
            main = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == "main"]
            assert main, name
            assert [a.arg for a in main[0].args.args] == ["argv"], name
            assert [a.arg for a in main[0].args.kwonlyargs] == ["quick", "out_dir"], name
            assert "common.environment()" in source and "common.write_json(" in source, name


def test_perf_modes_keep_the_committed_result_names():
    # perf.py --scale and --batched were two scripts of their own (issue 23): each mode writes the stem its
    # old script wrote, so the committed results stay valid.
    perf = _load("perf")
    assert set(perf.MODES) == {"perf", "scale", "batched"}
    for stem in perf.MODES:
        assert os.path.isfile(os.path.join(BENCH, "results", f"{stem}.json")), stem


@pytest.mark.slow
def test_gaussian_quick(tmp_path):
    _, data = _check("gaussian", tmp_path, ["kl_vs_M", "kl_vs_J", "fw_log_kl_slope_per_point"])
    kl = data["kl_vs_M"]
    # exact vectors have rank D + 1 = 3: GIGA reaches the exact posterior within M = 5, far below Rand
    assert kl["GIGA"]["5"]["median"] < 1e-6 < kl["Rand"]["5"]["median"]
    check = data["kl_formula_check"]
    assert math.isclose(check["isotropic"], check["cj.metrics.gaussian_kl"], rel_tol=1e-8)


@pytest.mark.slow
def test_iht_quick(tmp_path):
    _, data = _check("iht", tmp_path, ["gaussian", "rbf", "glm", "convergence"])
    conv = data["convergence"]
    assert min(conv["A-IHT II"]) <= conv["A-IHT II"][0]


@pytest.mark.slow
def test_regression_quick(tmp_path):
    sys.path.insert(0, BENCH)
    import common
    if common.data_path("phishing.npz") is None:  # the quick run uses the real phishing set (shared/data)
        pytest.skip(f"phishing.npz not found under {common.DATA_DIR} (set CORESETS_DATA)")
    _check("regression", tmp_path, ["datasets", "M"])


@pytest.mark.slow
def test_logistic_sensitivity_quick(tmp_path):
    _, data = _check("logistic_sensitivity", tmp_path, ["posterior", "scaling"])
    s = data["scaling"]["mean_sensitivity_vs_R"]
    for per_k in s.values():  # Lemma 3.1: the bound grows with R
        vals = list(per_k.values())
        assert vals == sorted(vals)


@pytest.mark.slow
def test_clustering_quick(tmp_path):
    _check("clustering", tmp_path, ["w1_normalized", "nll_normalized"])


@pytest.mark.slow
def test_device_quick(tmp_path):
    res = _load("device").main(quick=True, out_dir=str(tmp_path))
    with open(tmp_path / "device_quick.json") as f:
        data = json.load(f)
    assert (tmp_path / "device_quick.png").stat().st_size > 1000
    assert data["quick"] is True and data["device"]["backend"] == res["device"]["backend"]
    if data["device"]["backend"] == "cpu":
        assert "no GPU" in data["device"]["note"]  # the JSON says which device it ran on
    for row in data["pipeline"]:
        assert row["first_s"] > 0 and row["second_s"] > 0 and 0 < row["points"] <= row["M"]
    for method in ("frank_wolfe", "giga", "omp"):
        assert data["batched"][method]["speedup_vs_core_loop"] > 0
    assert data["coreset_mcmc"]["points"] > 0 and data["full_nuts"]["second_s"] > 0
    assert all(math.isfinite(x) for x in _finite_numbers(data))




def test_the_auto_size_oracle_scanned_down_is_the_oracle_scanned_up_where_kl_falls_with_m():
    scan = _load("auto_size").oracle_scan
    sizes = [16, 19, 23, 27, 32, 38, 45, 54, 64]
    falling = lambda m: 100.0 / m ** 2  # noqa: E731  # <= 0.1 from m = 32 on
    calls = []

    def kl_at(m):
        calls.append(m)
        return falling(m)

    up = scan(kl_at, sizes, 0.1, 54, "up")
    assert up[0] == 32 and sorted(up[1]) == [16, 19, 23, 27, 32]
    calls.clear()
    down = scan(kl_at, sizes, 0.1, 54, "down")
    assert down[0] == 32 and calls == [54, 45, 38, 32, 27]  # stops at the first failure below the chosen size
    # the chosen size fails its measured KL: upwards from it to the first that passes
    calls.clear()
    assert scan(kl_at, sizes, 0.1, 23, "down") == (32, {23: falling(23), 27: falling(27), 32: falling(32)})
    assert scan(kl_at, sizes, 1e-6, 23, "down")[0] is None and scan(kl_at, sizes, 1e-6, 23, "up")[0] is None
