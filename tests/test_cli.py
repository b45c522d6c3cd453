"""The main job's command line on a small config."""

import json

import pytest

from coresets_jax import cli


def test_run_writes_table_and_json(tmp_path, capsys):
    cfg = tmp_path / "small.yaml"
    cfg.write_text("data: {synthetic: logistic, n: 600, seed: 1}\nnum_features: 40\nsizes: [5, 20]\n"
                   "repeats: 1\n")
    assert cli.main(["run", str(cfg), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "frank_wolfe" in out and "uniform" in out
    report = json.loads((tmp_path / "out" / "results.json").read_text())
    rows = report["results"]
    assert [(r["method"], r["size"]) for r in rows] == [
        ("frank_wolfe", 5), ("uniform", 5), ("frank_wolfe", 20), ("uniform", 20)]
    for r in rows:
        assert 1 <= r["num_points"] <= r["size"] and r["relative_error"] >= 0 and r["time_s"] > 0
    # The data's true theta is [3, 3, 0]; the Laplace mean of 600 rows is near it.
    assert abs(report["laplace_mean"][0] - 3) < 1.5


def test_npz_config_and_bad_config(tmp_path, capsys):
    import numpy as np
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(size=(300, 1)), np.ones((300, 1))], 1)
    y = rng.poisson(np.log1p(np.exp(X @ [1.0, 0.0])))
    np.savez(tmp_path / "d.npz", X=X, y=y)
    (tmp_path / "p.yaml").write_text("model: poisson_regression\ndata: {path: d.npz}\nnum_features: 30\n"
                                     "sizes: [10]\nmethod: importance\nrepeats: 1\n")
    assert cli.main(["run", str(tmp_path / "p.yaml")]) == 0
    assert "importance" in capsys.readouterr().out
    (tmp_path / "bad.yaml").write_text("methd: giga\n")
    assert cli.main(["run", str(tmp_path / "bad.yaml")]) == 2
    assert "unknown key" in capsys.readouterr().err
    (tmp_path / "big.yaml").write_text("data: {synthetic: logistic, n: 50}\nsizes: [100]\n")
    assert cli.main(["run", str(tmp_path / "big.yaml")]) == 2
    assert "config.sizes" in capsys.readouterr().err
