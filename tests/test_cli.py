"""The command line: the main job on a small config, its outputs, and one-line errors with exit status 2."""

import json
import os

import jax
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax import cli

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_run_writes_table_json_coresets_and_plots(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    cfg = tmp_path / "small.yaml"
    cfg.write_text("data: {synthetic: logistic, n: 600, seed: 1}\nnum_features: 40\nsizes: [5, 20]\n"
                   "repeats: 1\nmethods: [frank_wolfe, giga, uniform]\n")
    out = tmp_path / "out"
    assert cli.main(["run", str(cfg), "--out", str(out), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert "frank_wolfe" in captured.out and "error = ||sum_n v_n - V^T w|| / ||sum_n v_n||" in captured.out
    assert "[1/3]" not in captured.err  # --quiet
    report = json.loads((out / "results.json").read_text())
    rows = report["results"]
    assert [(r["method"], r["size"]) for r in rows] == [
        (m, s) for s in (5, 20) for m in ("frank_wolfe", "giga", "uniform")]
    data = cj.data.synthetic_logistic(jax.random.key(1), 600).train
    assert "khat" in captured.out.splitlines()[0]  # certified by default
    for r in rows:
        assert 1 <= r["num_points"] <= r["size"] and r["relative_error"] >= 0 and r["time_s"] > 0
        assert r["kl_estimate"] >= 0 and np.isfinite(r["khat"])
        assert r["verdict"] in ("good", "usable", "poor", "unreliable")
        assert (r["verdict"] == "poor") == (r["kl_estimate"] >= 0.5 and r["verdict"] != "unreliable")
        assert len(r["indices"]) == len(r["weights"]) == r["size"]
        # The saved coreset matches the JSON and loads only with the same data.
        cs = cj.load(out / "coresets" / f"{r['method']}_M{r['size']}.npz", data=data)
        np.testing.assert_array_equal(cs.indices, r["indices"])
        np.testing.assert_allclose(cs.weights, r["weights"], rtol=1e-6)
    with pytest.raises(ValueError, match="differs"):
        cj.load(out / "coresets" / "giga_M5.npz", data=(data[0][:-1], data[1][:-1]))
    assert abs(report["laplace_mean"][0] - 3) < 1.5  # the data's theta is [3, 3, 0]
    for name in ("coreset_points.png", "errors.png", "marginals.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(report["files"]["plots"]) == sorted(str(out / n) for n in
                                                      ("coreset_points.png", "errors.png", "marginals.png"))


@pytest.mark.slow
def test_npz_data_and_legacy_method_keys(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(size=(300, 1)), np.ones((300, 1))], 1)
    y = rng.poisson(np.log1p(np.exp(X @ [1.0, 0.0])))
    np.savez(tmp_path / "d.npz", X=X, y=y)
    (tmp_path / "p.yaml").write_text("model: poisson_regression\ndata: {path: d.npz}\nnum_features: 30\n"
                                     "sizes: [10]\nmethod: importance\nrepeats: 0\n")
    assert cli.main(["run", str(tmp_path / "p.yaml"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "importance" in out and "uniform" in out  # method + the default baseline
    (tmp_path / "q.yaml").write_text("model: poisson_regression\ndata: {path: d.npz}\nnum_features: 30\n"
                                     "sizes: [10]\nmethod: importance\nrepeats: 0\ncertify: false\n")
    assert cli.main(["run", str(tmp_path / "q.yaml"), "--quiet"]) == 0
    assert "khat" not in capsys.readouterr().out


BAD_CONFIGS = {
    "data: {nn: 500}\n": "config.data.nn: unknown key; allowed keys: synthetic, n, seed, path",
    "data: {synthetic: logistic, n: 500.5}\n": "config.data.n: expected a positive integer, got 500.5",
    "sizes: []\n": "config.sizes: expected a non-empty list of positive integers or auto, got []",
    "sizes: -3\n": "config.sizes: expected a positive integer, got -3",
    "size: auto\nsizes: [10]\n": "config.size: give either size or sizes, not both",
    "sizes: [10, -1]\n": "config.sizes[1]: expected a positive integer, got -1",
    "sizes: [10]\nauto: []\ntol: 0.1\n": "config.tol: applies to automatic sizes only",
    "auto: [coreset_mcmc]\n": "config.auto[0]: 'coreset_mcmc' is posterior-driven",
    "auto: omp\n": "config.auto: expected a list of method names (possibly empty)",
    "sizes: [auto]\ntol: -1\n": "config.tol: expected a positive",
    "sizes: [auto]\nmethods: [omp, coreset_mcmc]\n": "config.sizes: auto searches sizes with a vector method",
    "methd: giga\n": "config.methd: unknown key",
    "methods: [giga, frank_wolf]\n": "config.methods[1]: 'frank_wolf' is not allowed; allowed values: uniform",
    "norm: fischer\n": "config.norm: 'fischer' is not allowed; allowed values: fisher, l2, centered",
    "num_features: true\n": "config.num_features: expected a positive integer, got True",
    "data: {synthetic: logistic, n: 50}\nsizes: [100]\n": "config.sizes[0]: M = 100 exceeds",
    "data: {synthetic: logistic\n  n: 5\n": "is not valid YAML at line 2",
    "- a\n- b\n": "must hold a mapping",
    "options: {giga: {foo: 1}}\nmethods: [giga]\n": "config.options.giga.foo: not an option of giga",
    "sample: {num_samples: 0}\n": "config.sample.num_samples: expected a positive integer, got 0",
    "data: {path: missing.npz}\n": "config.data.path: no file at",
    "prior_scale: -1\n": "config.prior_scale: expected a positive number, got -1",
}


@pytest.mark.parametrize("text", list(BAD_CONFIGS))
def test_config_mistakes_are_one_line_and_exit_2(tmp_path, capsys, monkeypatch, text):
    monkeypatch.setattr(cli, "run_job", lambda *a, **k: pytest.fail("validation must come before any work"))
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert cli.main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("coresets-jax: error: ") and err.count("\n") == 1, err
    assert BAD_CONFIGS[text] in err


@pytest.mark.parametrize("argv, expected", [
    (["run", "{tmp}"], "is a directory"),
    (["run", "{tmp}/nope.yaml"], "no such file"),
    (["run", "--out", "{tmp}/afile"], "--out: '{tmp}/afile' exists and is not a folder"),
    (["run", "--out", "{tmp}/no/such/parent"], "does not exist"),
    (["run", "--bogus"], "unrecognized arguments: --bogus"),
    (["bench", "no_such_benchmark"], "available: "),
    (["frobnicate"], "invalid choice"),
    ([], "required: COMMAND"),
])
def test_command_line_mistakes_are_one_line_and_exit_2(tmp_path, capsys, monkeypatch, argv, expected):
    monkeypatch.setattr(cli, "run_job", lambda *a, **k: pytest.fail("checks must come before any work"))
    (tmp_path / "afile").write_text("")
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected.format(tmp=tmp_path) in err, err


def test_bench_lists_real_scripts(capsys):
    assert cli.main(["bench", "nope"]) == 2
    err = capsys.readouterr().err
    listed = err.split("available: ")[1].split(";")[0].strip().split(", ")
    studies = err.split("investigations (one-off studies): ")[1].strip().split(", ")
    assert "solvers" in listed and "progress_overhead" in studies
    assert all(os.path.isfile(os.path.join(REPO, "benchmarks", f"{name}.py")) for name in listed)
    assert all(os.path.isfile(os.path.join(REPO, "benchmarks", "investigations", f"{name}.py")) for name in studies)
    assert "common" not in listed and "numpy_reference" not in listed  # helpers, not programs


def test_bench_runs_an_investigation_and_reports_a_failed_run(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(cli.subprocess, "call", lambda command, cwd: calls.append(command) or 3)
    assert cli.main(["bench", "fisher_check_overhead"]) == 3  # the script's exit status, said on stderr
    assert calls[0][1].endswith(os.path.join("benchmarks", "investigations", "fisher_check_overhead.py"))
    assert "failed with exit status 3" in capsys.readouterr().err


def test_bench_quick_fails_loudly_where_a_script_has_no_quick_mode(tmp_path, monkeypatch, capsys):
    # Issue 23: `bench end_to_end --quick` died in argparse and `bench inference --quick` ran in full; both
    # are now `inference.py` (with --quick). Every script in benchmarks/ has a quick mode now, so a stand-in
    # without one checks that such a script is refused, not run in full.
    folder = os.path.join(REPO, "benchmarks")
    assert all(cli._benchmarks(folder).values()) and all(cli._investigations(folder).values())
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "no_quick.py").write_text('if __name__ == "__main__":\n    pass\n')
    monkeypatch.setattr(cli, "_repo_benchmarks", lambda: str(tmp_path / "benchmarks"))
    monkeypatch.setattr(cli.subprocess, "call", lambda *a, **k: pytest.fail("a refused run must not start"))
    assert cli.main(["bench", "no_quick", "--quick"]) == 2
    assert "has no --quick mode" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["bench", "--help"], ["info", "--help"]])
def test_help_at_every_level(capsys, argv):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 0
    assert "usage: coresets-jax" in capsys.readouterr().out


def test_info_lists_versions_and_methods(capsys):
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "jax " in out and "devices:" in out
    for method in cj.METHODS:
        assert method in out


def test_one_size_or_method_alone_stands_for_a_list(tmp_path):
    """`size: auto` (the issue's spelling), `sizes: 50` and `methods: omp` mean the one-item lists."""
    def load(text):
        (tmp_path / "c.yaml").write_text(text)
        return cli.load_config(str(tmp_path / "c.yaml"))

    assert load("size: auto\ntol: 0.05\nmethods: omp\n") == load("sizes: [auto]\ntol: 0.05\nmethods: [omp]\n")
    config = load("sizes: 50\nmethods: giga\n")
    assert config["sizes"] == [50] and config["methods"] == ["giga"]


def test_every_shipped_config_validates_or_names_its_file():
    folder = os.path.join(REPO, "configs")
    names = sorted(f for f in os.listdir(folder) if f.endswith(".yaml"))
    assert "default.yaml" in names
    for name in names:
        try:
            config = cli.load_config(os.path.join(folder, name))
        except cli.ConfigError as err:  # a dataset outside the repository: the message says where
            assert "config.data.path: no file at " + os.path.join(REPO, "data") in str(err), name
            continue
        assert config["methods"] and config["sizes"]
    assert cli.load_config(os.path.join(folder, "default.yaml")) == cli.load_config(None)


@pytest.mark.slow
@pytest.mark.extended
def test_sample_adds_posterior_quality(tmp_path, capsys):
    cfg = tmp_path / "s.yaml"
    cfg.write_text("data: {synthetic: logistic, n: 500, seed: 2}\nnum_features: 30\nsizes: [100]\n"
                   "repeats: 0\nmethods: [giga, uniform]\nsample: {num_samples: 200, num_warmup: 200}\n")
    assert cli.main(["run", str(cfg), "--sample", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "W1/floor" in out
    rows = [line.replace("!", " ! ").split() for line in out.splitlines() if line.startswith(("giga", "uniform"))]
    ratios = {r[0]: float(r[-1]) for r in rows}
    # The certificate's columns come from the same chains: KL estimates order the two coresets as W1 does,
    # and "!" marks exactly the rows whose verdict is "unreliable" (k-hat >= 0.7 over spread ratios) or "poor"
    # (a KL estimate of 0.5 nat or more).
    khat = {r[0]: float(r[6]) for r in rows}
    kl = {r[0]: float(r[7]) for r in rows}
    assert kl["giga"] < kl["uniform"] and ratios["giga"] < ratios["uniform"]
    assert all((r[8] == "!") == (khat[r[0]] >= 0.7 or kl[r[0]] >= 0.5) for r in rows if kl[r[0]] > 0.01)
    # Both are finite and positive; a 100-point GIGA coreset of 500 rows is closer than noise x 5.
    assert 0 < ratios["giga"] < 5 and ratios["uniform"] > 0


def test_num_features_auto_is_the_coreset_default_for_the_largest_size(tmp_path, monkeypatch):
    # a budget of 600 rows x 50 features stands in for 2^26 entries, so the rule's floor shows:
    # J = max(64, 16 D, largest M, budget // N) = max(64, 48, 20, 50) = 64 for D = 3
    monkeypatch.setattr(cj.features.projection, "FEATURE_BUDGET", 600 * 50)
    cfg = tmp_path / "auto_j.yaml"
    cfg.write_text("data: {synthetic: logistic, n: 600, seed: 1}\nnum_features: auto\nsizes: [5, 20]\n"
                   "repeats: 0\nmethods: [giga]\nauto: []\ncertify: false\n")
    out = tmp_path / "out"
    assert cli.main(["run", str(cfg), "--out", str(out), "--quiet"]) == 0
    report = json.loads((out / "results.json").read_text())
    assert report["dim"] == 3 and report["config"]["num_features"] == 64


def test_the_report_marks_the_sizes_the_screen_judged():
    from coresets_jax.cli.report import format_table

    path = [{"size": 16, "points": 16, "kl": 5.0, "kl_se": 0.1, "verdict": "poor", "passed": False, "screened": True},
            {"size": 32, "points": 30, "kl": 0.02, "kl_se": 0.004, "verdict": "good", "passed": True,
             "screened": False}]
    row = {"method": "omp", "size": "auto", "chosen_size": 32, "num_points": 30, "time_s": 1.0, "first_call_s": 1.0,
           "relative_error": 0.01, "path": path, "tol": 0.1}
    report = {"results": [row], "stages": {"laplace_s": 0.1, "projection_s": 0.2}, "n": 200_000, "dim": 3,
              "config": {}}
    text = format_table(report)
    assert "16 (KL 5 ± 0.1, poor, screened), 32 (KL 0.02 ± 0.004, good)" in text
    assert "screened: judged from a subsample" in text
    path[0]["screened"] = False
    assert "screened" not in format_table(report)
