"""The command line with the user's own files: CSV data (header convention, located mistakes) and the user's own
model (`model: package.module:function`, a cj.Model factory or a NumPyro model)."""

import os
import sys
import textwrap

import numpy as np
import pytest

from coresets_jax import cli
from coresets_jax.data import load_csv, load_file

SMALL = "num_features: 20\nsizes: [5]\nmethods: [giga]\nrepeats: 0\ncertify: false\n"


def _logistic_rows(n=120, seed=0):
    """Two features and {0, 1} labels from a logistic model with an intercept of 0.5."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2))
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-(x @ [2.0, -1.0] + 0.5)))).astype(float)
    return x, y


def _write_csv(path, header, rows):
    path.write_text(",".join(header) + "\n" + "".join(",".join(repr(float(v)) for v in r) + "\n" for r in rows))


@pytest.fixture
def reports(monkeypatch):
    """The reports of cli.main's runs (the CLI prints a table; the weights are in the report)."""
    out = []

    def keep(*args, **kwargs):
        report = run(*args, **kwargs)
        out.append(report)
        return report

    run = cli.run_job
    monkeypatch.setattr(cli, "run_job", keep)
    return out


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """Writes tmp_path/NAME.py, puts tmp_path on sys.path, and forgets the module afterwards."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names = []

    def write(name, source):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        names.append(name)

    yield write
    for name in names:
        sys.modules.pop(name, None)


def _one_line_error(capsys, argv):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("coresets-jax: error: ") and err.count("\n") == 1, err
    return err


# --------------------------------------------------------------------------------------------------------
# CSV data.


def test_csv_gives_the_same_coreset_as_npz(tmp_path, reports, capsys):
    x, y = _logistic_rows()
    # CSV: label column named "target" in the middle, no intercept column (intercept: true appends it).
    _write_csv(tmp_path / "d.csv", ["x1", "target", "x2"], np.column_stack([x[:, 0], y, x[:, 1]]))
    np.savez(tmp_path / "d.npz", X=np.column_stack([x, np.ones(len(y))]), y=y)
    (tmp_path / "csv.yaml").write_text("data: {path: d.csv, label: target, intercept: true}\n" + SMALL)
    (tmp_path / "npz.yaml").write_text("data: {path: d.npz}\n" + SMALL)
    assert cli.main(["run", str(tmp_path / "csv.yaml"), "--quiet"]) == 0
    assert cli.main(["run", str(tmp_path / "npz.yaml"), "--quiet"]) == 0
    from_csv, from_npz = reports
    assert from_csv["n"] == from_npz["n"] == 120 and from_csv["dim"] == from_npz["dim"] == 3
    for a, b in zip(from_csv["results"], from_npz["results"]):
        assert a["indices"] == b["indices"]
        np.testing.assert_array_equal(a["weights"], b["weights"])
        assert sum(w > 0 for w in a["weights"]) >= 1
    np.testing.assert_array_equal(from_csv["laplace_mean"], from_npz["laplace_mean"])
    assert "giga" in capsys.readouterr().out


def test_csv_reader_conventions(tmp_path):
    # Quotes, spaces, a byte-order mark and blank lines are fine; num_test and test_path hold rows out, and a
    # test file's columns are matched by name.
    (tmp_path / "a.csv").write_text('\ufeffb, a ,y\n"1", 2 ,1\n\n3,4,0\n5,6,1\n', encoding="utf-8")
    ds = load_csv(tmp_path / "a.csv")
    np.testing.assert_array_equal(ds.X, [[1, 2], [3, 4], [5, 6]])
    np.testing.assert_array_equal(ds.y, [1, 0, 1])
    ds = load_file(tmp_path / "a.csv", num_test=1, intercept=True)
    np.testing.assert_array_equal(ds.Xt, [[5, 6, 1]])
    (tmp_path / "t.csv").write_text("y,a,b\n0,20,10\n")
    ds = load_file(tmp_path / "a.csv", test_path=tmp_path / "t.csv")
    np.testing.assert_array_equal(ds.Xt, [[10, 20]])
    np.testing.assert_array_equal(ds.yt, [0])
    (tmp_path / "u.csv").write_text("y,a,c\n0,20,10\n")
    with pytest.raises(ValueError, match="missing: b; not in the training file: c"):
        load_file(tmp_path / "a.csv", test_path=tmp_path / "u.csv")
    with pytest.raises(ValueError, match="leave no training rows"):
        load_file(tmp_path / "a.csv", num_test=3)


BAD_CSV = {
    # name: (file text, what the one-line error must say after the file's name)
    "text": ("a,b,y\n1,2,1\n3,abc,0\n", ", row 3, column 'b' (B): 'abc' is not a number"),
    "empty_cell": ("a,b,y\n1,2,1\n3,4,0\n5,,1\n", ", row 4, column 'b' (B): empty cell"),
    "not_finite": ("a,b,y\n1,2,1\n3,4,inf\n", ", row 3, column 'y' (C): 'inf' is not a finite number"),
    "short_row": ("a,b,y\n1,2,1\n3,4\n", ", row 3: 2 cells, but the header (row 1) has 3 columns (a, b, y)"),
    "long_row": ("a,b,y\n1,2,1,\n", ", row 2: 4 cells, but the header (row 1) has 3 columns (a, b, y)"),
    "no_label": ("a,b,label\n1,2,1\n", " has no label column 'y' in its header (row 1); its columns: a, b, label"),
    "no_header": ("1,2,1\n3,4,0\n", " has no label column 'y' in its header (row 1); its columns: 1, 2, 1. Row 1 "
                                    "holds numbers"),
    "empty": ("", " is empty; expected a header row (row 1)"),
    "header_only": ("a,b,y\n", " has a header (row 1) but no data rows"),
    "twice": ("a,a,y\n1,2,1\n", ", row 1: the column name 'a' appears twice (columns A and B)"),
}


@pytest.mark.parametrize("name", list(BAD_CSV))
def test_bad_csv_names_file_row_and_column(tmp_path, capsys, name):
    text, expected = BAD_CSV[name]
    (tmp_path / f"{name}.csv").write_text(text)
    (tmp_path / "c.yaml").write_text(f"data: {{path: {name}.csv}}\n" + SMALL)
    err = _one_line_error(capsys, ["run", str(tmp_path / "c.yaml")])
    assert f"config.data.path: '{tmp_path / name}.csv'" in err and expected in err, err


@pytest.mark.parametrize("data, expected", [
    ("{path: d.xlsx}", "config.data.path: 'd.xlsx' has extension '.xlsx'; supported data files: .npz with arrays "
                       "X, y and optionally Xt, yt; .csv with a header row"),
    ("{path: d}", "config.data.path: 'd' has no extension"),
    ("{path: csv_text.npz}", "is not an .npz archive"),
    ("{path: ok.npz, label: target}", "config.data.label: applies to a .csv file"),
    ("{synthetic: logistic, intercept: true}", "config.data.intercept: applies to a data file"),
    ("{path: ok.npz, test_path: t.json}", "config.data.test_path: 't.json' has extension '.json'"),
    ("{path: ok.npz, test_path: ok.npz, num_test: 3}", "config.data.num_test: give the held-out rows either"),
    ("{path: ok.csv, test_path: bad.csv}", "config.data.test_path: '{tmp}/bad.csv', row 3, column 'a' (A): empty "
                                           "cell"),
    ("{path: ok.csv, test_path: other.csv}", "config.data.test_path: '{tmp}/other.csv' has other feature columns "
                                             "than '{tmp}/ok.csv'; missing: b; not in the training file: c"),
    ("{path: ok.csv, num_test: 20}", "config.data.num_test: 20 held-out rows leave no training rows"),
])
def test_data_file_mistakes(tmp_path, capsys, data, expected):
    (tmp_path / "csv_text.npz").write_text("a,b,y\n1,2,1\n")
    _write_csv(tmp_path / "ok.csv", ["a", "b", "y"], np.ones((20, 3)))
    (tmp_path / "bad.csv").write_text("a,b,y\n1,2,1\n,2,1\n")
    (tmp_path / "other.csv").write_text("a,c,y\n1,2,1\n")
    expected = expected.format(tmp=tmp_path)
    np.savez(tmp_path / "ok.npz", X=np.ones((20, 2)), y=np.ones(20))
    (tmp_path / "c.yaml").write_text(f"data: {data}\n" + SMALL)
    err = _one_line_error(capsys, ["run", str(tmp_path / "c.yaml")])
    assert expected in err and "unsafely" not in err and "pickle" not in err, err


# --------------------------------------------------------------------------------------------------------
# The user's own model.

JAX_MODEL = """
    import jax, jax.numpy as jnp
    import coresets_jax as cj

    calls = []

    def make(prior_scale=1.0):
        calls.append(prior_scale)

        def log_likelihood(theta, datum):       # y in {0, 1}
            x, y = datum
            return -jax.nn.softplus(-(2 * y - 1) * jnp.dot(x, theta))

        def log_prior(theta):
            return -0.5 * jnp.sum(theta ** 2) / prior_scale ** 2

        return cj.Model(log_likelihood, log_prior, dim=3, name="user_logistic")
"""

NUMPYRO_MODEL = """
    import numpyro
    import numpyro.distributions as dist

    def logreg(X, y=None):
        beta = numpyro.sample("beta", dist.Normal(0, 1).expand([X.shape[1]]).to_event(1))
        with numpyro.plate("data", X.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=X @ beta), obs=y)

    def make():
        return logreg
"""


def test_user_cj_model_factory_runs_through_the_cli(tmp_path, user_module, reports, capsys):
    user_module("cli_user_jax_model", JAX_MODEL)
    x, y = _logistic_rows()
    _write_csv(tmp_path / "d.csv", ["x1", "x2", "y"], np.column_stack([x, y]))
    (tmp_path / "m.yaml").write_text("model: cli_user_jax_model:make\nmodel_options: {prior_scale: 2.0}\n"
                                     "data: {path: d.csv, intercept: true}\n" + SMALL)
    assert cli.main(["run", str(tmp_path / "m.yaml"), "--quiet"]) == 0
    assert sys.modules["cli_user_jax_model"].calls == [2.0]
    (report,) = reports
    assert report["dim"] == 3 and report["config"]["model_options"] == {"prior_scale": 2.0}
    assert "prior_scale" not in report["config"]
    assert report["laplace_mean"][0] > 0.5 and report["laplace_mean"][1] < -0.2  # theta = [2, -1, 0.5]
    assert report["results"][0]["num_points"] >= 1
    assert "giga" in capsys.readouterr().out


def test_user_numpyro_model_runs_through_the_cli(tmp_path, user_module, reports, capsys):
    # The module sits beside the config, not on sys.path: the config's folder is searched after sys.path.
    sub = tmp_path / "proj"
    sub.mkdir()
    (sub / "cli_user_numpyro_model.py").write_text(textwrap.dedent(NUMPYRO_MODEL))
    try:
        x, y = _logistic_rows()
        _write_csv(sub / "d.csv", ["x1", "x2", "y"], np.column_stack([x, y]))
        (sub / "m.yaml").write_text("model: cli_user_numpyro_model:make\ndata: {path: d.csv, intercept: true}\n"
                                    + SMALL)
        assert cli.main(["run", str(sub / "m.yaml"), "--quiet"]) == 0
    finally:
        sys.modules.pop("cli_user_numpyro_model", None)
    assert str(sub) not in sys.path
    (report,) = reports
    assert report["n"] == 120 and report["dim"] == 3  # beta: 2 features and the intercept
    assert report["laplace_mean"][0] > 0.5 and report["laplace_mean"][1] < -0.2  # theta = [2, -1, 0.5]
    assert report["results"][0]["num_points"] >= 1
    assert "giga" in capsys.readouterr().out


@pytest.mark.slow  # MCMC on the coreset: about 20 s with compilation
def test_held_out_rows_give_a_test_log_likelihood_column(tmp_path, reports, capsys):
    x, y = _logistic_rows(140)
    _write_csv(tmp_path / "train.csv", ["x1", "x2", "y"], np.column_stack([x[:120], y[:120]]))
    _write_csv(tmp_path / "test.csv", ["y", "x2", "x1"], np.column_stack([y[120:], x[120:, 1], x[120:, 0]]))
    (tmp_path / "m.yaml").write_text("data: {path: train.csv, test_path: test.csv, intercept: true}\n"
                                     "num_features: 20\nsizes: [10]\nmethods: [giga]\nrepeats: 0\n"
                                     "sample: {method: mala, num_samples: 100, num_warmup: 100}\n")
    assert cli.main(["run", str(tmp_path / "m.yaml"), "--quiet"]) == 0
    (report,) = reports
    assert report["n"] == 120 and report["n_test"] == 20
    row = report["results"][0]
    assert np.isfinite(row["khat"]) and -0.75 < row["test_log_likelihood"] < -0.1  # log 1/2 = -0.69: chance
    out = capsys.readouterr().out
    assert "test LL" in out.splitlines()[0] and "20 held-out rows" in out


USER_MODEL_MISTAKES = {
    "model: no_such_pkg_xyz.models:make\n": "config.model: 'no_such_pkg_xyz.models:make': no module named "
                                            "'no_such_pkg_xyz'",
    "model: cli_mistakes_mod:nothing\n": "config.model: 'cli_mistakes_mod:nothing': cli_mistakes_mod has no "
                                         "attribute 'nothing'",
    "model: cli_mistakes_mod:NUMBER\n": "config.model: 'cli_mistakes_mod:NUMBER' is not a function (its type is int)",
    "model: cli_mistakes_mod:returns_int\n": "config.model: 'cli_mistakes_mod:returns_int' returned int; expected "
                                             "a cj.Model or a NumPyro model function",
    "model: cli_mistakes_mod:no_dim\n": "returned a cj.Model without dim or init_params",
    "model: cli_mistakes_mod:needs_args\n": "config.model: calling cli_mistakes_mod:needs_args() failed: TypeError",
    "model: cli_mistakes_mod:returns_int\nmodel_options: {a: 1}\n": "calling cli_mistakes_mod:returns_int(a=1) "
                                                                   "failed: TypeError",
    "model: cli_mistakes_mod:not_numpyro\n": "config.model: 'cli_mistakes_mod:not_numpyro' returned a function "
                                             "that cj.from_numpyro(fn, X, y) cannot use",
    "model: cli_broken_mod:make\n": "config.model: 'cli_broken_mod:make': importing cli_broken_mod failed: "
                                    "ZeroDivisionError",
    "model: cli_mistakes_mod:returns_int\nprior_scale: 2\n": "config.prior_scale: applies to the built-in models "
                                                             "only",
    "model_options: {a: 1}\n": "config.model_options: applies to model: package.module:function only",
    "model: not/a:module\n": "config.model: 'not/a:module' is not of the form package.module:function",
    "model: logistic\n": "config.model: 'logistic' is not allowed; allowed values: logistic_regression, "
                         "poisson_regression, or package.module:function",
}


@pytest.mark.parametrize("text", list(USER_MODEL_MISTAKES))
def test_user_model_mistakes_are_one_line(tmp_path, user_module, capsys, text):
    user_module("cli_mistakes_mod", """
        import coresets_jax as cj
        NUMBER = 3
        def returns_int():
            return 3
        def no_dim():
            return cj.Model(lambda theta, d: 0.0, lambda theta: 0.0)
        def needs_args(x):
            return None
        def not_numpyro():
            return lambda X, y: None
    """)
    user_module("cli_broken_mod", "1 / 0\n")
    np.savez(tmp_path / "ok.npz", X=np.ones((20, 2)), y=np.ones(20))
    (tmp_path / "c.yaml").write_text(text + "data: {path: ok.npz}\n" + SMALL)
    err = _one_line_error(capsys, ["run", str(tmp_path / "c.yaml")])
    assert USER_MODEL_MISTAKES[text] in err, err


# --------------------------------------------------------------------------------------------------------
# Release files.


def test_citation_version_matches_the_package():
    import tomllib

    import yaml

    import coresets_jax as cj

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(repo, "pyproject.toml"), "rb") as f:
        version = tomllib.load(f)["project"]["version"]
    with open(os.path.join(repo, "CITATION.cff")) as f:
        citation = yaml.safe_load(f)
    assert str(citation["version"]) == version == cj.__version__
    assert citation["license"] == "MIT" and citation["cff-version"].startswith("1.2")
    assert len(citation["references"]) == 8
    with open(os.path.join(repo, "LICENSE")) as f:
        assert f.read().startswith("MIT License")
    with open(os.path.join(repo, "CHANGELOG.md")) as f:
        assert f"## [{version}]" in f.read()
