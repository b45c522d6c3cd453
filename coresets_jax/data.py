"""Datasets: synthetic generators from the papers and loaders for data files.

Data files (`load_file` picks the reader by the extension):

- `.npz` (`load_npz`): arrays X (N, D) and y (N,), optionally Xt, yt (held-out rows); the papers' format.
- `.csv` (`load_csv`): a header row naming the columns, then one row per datum. The label column is named
  `y` (the `label` argument; `data.label` in a `coresets-jax` config) and every other column is a feature,
  in the file's order. Every cell is a finite number (`1`, `-0.5`, `2e-3`; quotes and spaces around a number
  are allowed); blank lines are skipped. A UTF-8 byte-order mark (as Excel writes) is allowed. Mistakes
  name the file, the column (its header name and spreadsheet letter) and the row, counted as a spreadsheet
  does: the header is row 1, the first datum row 2.

`load_file` also appends an intercept column of ones (`intercept=True`; X is otherwise used as it is) and
takes held-out rows from a second file (`test_path`) or from the end of the first (`num_test`).
"""

from __future__ import annotations

import csv
import os
import warnings
import zipfile
from typing import NamedTuple, Optional

import jax
import jax.numpy as jnp
import numpy as np

from .core import validate as _validate

__all__ = ["BINARY_P", "BINARY_THETA", "DATA_FORMATS", "Dataset", "load_csv", "load_file", "load_npz",
           "synthetic_binary", "synthetic_gaussian", "synthetic_gaussian_mean", "synthetic_logistic",
           "synthetic_mixture", "synthetic_poisson", "synthetic_bradley_terry", "synthetic_rbf",
           "synthetic_sparse_regression", "synthetic_vmf"]

# LR §4: feature frequencies p and coefficients theta of BINARY10; BINARY5 takes the first 5 of each.
BINARY_P = (1.0, 0.2, 0.3, 0.5, 0.01, 0.1, 0.2, 0.007, 0.005, 0.001)
BINARY_THETA = (-3.0, 1.2, -0.5, 0.8, 3.0, -1.0, -0.7, 4.0, 3.5, 4.5)


class Dataset(NamedTuple):
    """Train data (X, y) and optional held-out test data; `train`/`test` are the model's data pytrees."""

    X: jax.Array
    y: jax.Array
    Xt: Optional[jax.Array] = None
    yt: Optional[jax.Array] = None
    theta_true: Optional[jax.Array] = None

    @property
    def train(self):
        return (self.X, self.y)

    @property
    def test(self):
        return None if self.Xt is None else (self.Xt, self.yt)


def _split(key, X, y, theta, num_test):
    if num_test == 0:
        return Dataset(X, y, theta_true=theta)
    return Dataset(X[:-num_test], y[:-num_test], X[-num_test:], y[-num_test:], theta)


def _glm_data(key, n: int, theta, num_test: int, dtype, response) -> Dataset:
    """HC §7.2's GLM data: x ~ N(0, I_{D-1}), X = [x, 1] (an intercept column), and y = response(key, X theta)
    drawn given the linear predictor; the last `num_test` rows are held out."""
    key = _validate.check_key(key)
    theta = jnp.asarray(theta, dtype)
    kx, ky = jax.random.split(key)
    total = n + num_test
    X = jnp.concatenate([jax.random.normal(kx, (total, theta.shape[0] - 1), dtype),
                         jnp.ones((total, 1), dtype)], axis=1)
    y = response(ky, X @ theta).astype(dtype)
    return _split(key, X, y, theta, num_test)


def synthetic_logistic(key: jax.Array, n: int = 10_000, theta=(3.0, 3.0, 0.0), num_test: int = 0,
                       dtype=jnp.float32) -> Dataset:
    """HC §7.2: x ~ N(0, I_{D-1}), X = [x, 1], y ~ ±1 with P(y = 1) = sigmoid(X theta); theta = [3, 3, 0]."""
    def labels(k, eta):
        return jnp.where(jax.random.uniform(k, eta.shape, eta.dtype) < jax.nn.sigmoid(eta), 1.0, -1.0)

    return _glm_data(key, n, theta, num_test, dtype, labels)


def synthetic_poisson(key: jax.Array, n: int = 10_000, theta=(1.0, 0.0), num_test: int = 0,
                      dtype=jnp.float32) -> Dataset:
    """HC §7.2: x ~ N(0, I_{D-1}), X = [x, 1], y ~ Poisson(log(1 + exp(X theta))); theta = [1, 0]."""
    return _glm_data(key, n, theta, num_test, dtype,
                     lambda k, eta: jax.random.poisson(k, jax.nn.softplus(eta), eta.shape))


def synthetic_bradley_terry(key: jax.Array, n: int = 20_000, num_players: int = 50, num_test: int = 0,
                            spread: float = 1.0) -> Dataset:
    """Paired comparisons for `cj.models.bradley_terry`: strengths theta_i ~ N(0, spread^2), each game a
    uniformly random pair of distinct players (X of shape (N, 2), int32), y = 1 if the first player won,
    with P = sigmoid(theta_a - theta_b), else 0."""
    key = _validate.check_key(key)
    if num_players < 2:
        raise ValueError(f"num_players: must be at least 2, got {num_players}")
    k_theta, k_a, k_b, k_y = jax.random.split(key, 4)
    total = n + num_test
    theta = spread * jax.random.normal(k_theta, (num_players,))
    a = jax.random.randint(k_a, (total,), 0, num_players)
    b = (a + jax.random.randint(k_b, (total,), 1, num_players)) % num_players  # uniform over b != a
    pairs = jnp.stack([a, b], axis=1).astype(jnp.int32)
    y = (jax.random.uniform(k_y, (total,)) < jax.nn.sigmoid(theta[a] - theta[b])).astype(jnp.float32)
    return _split(key, pairs, y, theta, num_test)


def synthetic_sparse_regression(key: jax.Array, n: int = 50_000, beta=(0.0,) * 5 + (5.0,) * 5,
                                noise: float = 25.0, num_test: int = 0, dtype=jnp.float32) -> Dataset:
    """The sparse regression of the Coreset MCMC experiments (coreset-mcmc.md §4.1): x ~ N(0, I_p),
    y = x^T beta + noise * eps, with beta = (0, 0, 0, 0, 0, 5, 5, 5, 5, 5) and noise sd 25."""
    key = _validate.check_key(key)
    beta = jnp.asarray(beta, dtype)
    kx, ke = jax.random.split(key)
    total = n + num_test
    X = jax.random.normal(kx, (total, beta.shape[0]), dtype)
    y = X @ beta + noise * jax.random.normal(ke, (total,), dtype)
    return _split(key, X, y, beta, num_test)


def synthetic_gaussian(key: jax.Array, n: int, dim: int = 2, mean=None, dtype=jnp.float32) -> jax.Array:
    """HC §6: y_n ~ N(mu, I) with mu = 0 by default; returns the (N, D) array."""
    key = _validate.check_key(key)
    mu = jnp.zeros(dim, dtype) if mean is None else jnp.asarray(mean, dtype)
    return mu + jax.random.normal(key, (n, dim), dtype)


def synthetic_gaussian_mean(key: jax.Array, n: int = 600, dim: int = 200, num_test: int = 0,
                            dtype=jnp.float32) -> Dataset:
    """IHT §5.1 (and HC §6 with dim = 2): theta ~ N(0, I_D), x_n ~ N(theta, I_D); X holds the x_n, y is None.

    IHT §5.1 uses D = 200, N = 600 (the defaults).
    """
    key = _validate.check_key(key)
    if n < 1 or dim < 1:
        raise ValueError(f"n, dim: must be positive, got n = {n}, dim = {dim}")
    k_theta, k_x = jax.random.split(key)
    theta = jax.random.normal(k_theta, (dim,), dtype)
    X = theta + jax.random.normal(k_x, (n + num_test, dim), dtype)
    if num_test == 0:
        return Dataset(X, None, theta_true=theta)
    return Dataset(X[:n], None, X[n:], None, theta)


def synthetic_binary(key: jax.Array, n: int = 1_000_000, dim: int = 10, num_test: int = 0,
                     dtype=jnp.float32) -> Dataset:
    """LR §4 BINARY5 (dim = 5) and BINARY10 (dim = 10): X_nd ~ Bern(p_d) independently, y_n ~ logistic(X_n
    theta) in {-1, +1}, with p and theta from LR §4 (`BINARY_P`, `BINARY_THETA`; their first `dim` entries).

    p_1 = 1, so the first feature is the intercept. Rare features (p = 0.01 .. 0.001) carry large
    coefficients: the "rare but highly predictive" regime the paper targets.
    """
    key = _validate.check_key(key)
    if dim not in (5, 10):
        raise ValueError(f"dim: LR §4 defines BINARY5 and BINARY10 only, got {dim}")
    p = jnp.asarray(BINARY_P[:dim], dtype)
    theta = jnp.asarray(BINARY_THETA[:dim], dtype)
    kx, ky = jax.random.split(key)
    total = n + num_test
    X = (jax.random.uniform(kx, (total, dim), dtype) < p).astype(dtype)
    prob = jax.nn.sigmoid(X @ theta)
    y = jnp.where(jax.random.uniform(ky, (total,), dtype) < prob, 1.0, -1.0).astype(dtype)
    return _split(key, X, y, theta, num_test)


def synthetic_mixture(key: jax.Array, n: int = 1_000_000, num_test: int = 0, dtype=jnp.float32) -> Dataset:
    """LR §4 MIXTURE: y_n ~ Bern(1/2) in {-1, +1}, x_n ~ N(mu_{y_n}, I_10) with
    mu_{-1} = (0,0,0,0,0,1,1,1,1,1) and mu_{+1} = (1,1,1,1,1,0,0,0,0,0). theta_true is None (the model is
    not logistic)."""
    key = _validate.check_key(key)
    ky, kx = jax.random.split(key)
    total = n + num_test
    y = jnp.where(jax.random.bernoulli(ky, 0.5, (total,)), 1.0, -1.0).astype(dtype)
    first = (jnp.arange(10) < 5).astype(dtype)
    mean = jnp.where((y > 0)[:, None], first, 1.0 - first)
    X = mean + jax.random.normal(kx, (total, 10), dtype)
    return _split(key, X, y, None, num_test)


def synthetic_vmf(key: jax.Array, n: int = 10_000, num_test: int = 0, tau: float = 50.0,
                  dtype=jnp.float32) -> Dataset:
    """HC §7.2 directional clustering: an equally weighted mixture of 6 vMF(mu_k, tau) on S^2, one mode at
    each axis pole (+-e_1, +-e_2, +-e_3). X holds the unit vectors, y the component labels, and theta_true
    the packed [mu_1..mu_6, omega] (`cj.models.vmf.pack`)."""
    from .models.vmf import VMFParams, pack, sample_vmf

    key = _validate.check_key(key)
    if not tau > 0:
        raise ValueError(f"tau: must be positive, got {tau}")
    poles = jnp.concatenate([jnp.eye(3, dtype=dtype), -jnp.eye(3, dtype=dtype)])
    kz, kx = jax.random.split(key)
    total = n + num_test
    labels = jax.random.randint(kz, (total,), 0, 6)
    X = jax.vmap(sample_vmf, in_axes=(0, 0, None))(jax.random.split(kx, total), poles[labels],
                                                   jnp.asarray(tau, dtype))
    theta = pack(VMFParams(poles, jnp.full(6, 1.0 / 6.0, dtype)))
    return _split(key, X.astype(dtype), labels.astype(dtype), theta, num_test)


def synthetic_rbf(key: jax.Array, n: int = 1000, num_test: int = 0, dtype=jnp.float32) -> Dataset:
    """Synthetic 2-D coordinates standing in for IHT §5.2's UK house-price data (which is not shipped):
    locations from a mixture of 8 Gaussian "towns" with spread 0.3-1.5 in a 10 x 6 box, and log-prices
    y = 12 + a smooth field (sum of 5 random bumps of width 1-3) + N(0, 0.3^2) noise.

    X holds the coordinates (N, 2); theta_true is None (the field is not in the model's span).
    """
    key = _validate.check_key(key)
    k_town, k_spread, k_pick, k_loc, k_bump, k_amp, k_width, k_noise = jax.random.split(key, 8)
    total = n + num_test
    box = jnp.asarray([10.0, 6.0], dtype)
    towns = jax.random.uniform(k_town, (8, 2), dtype) * box
    spread = jax.random.uniform(k_spread, (8,), dtype, 0.3, 1.5)
    which = jax.random.randint(k_pick, (total,), 0, 8)
    X = towns[which] + spread[which, None] * jax.random.normal(k_loc, (total, 2), dtype)
    bumps = jax.random.uniform(k_bump, (5, 2), dtype) * box
    amp = jax.random.normal(k_amp, (5,), dtype)
    width = jax.random.uniform(k_width, (5,), dtype, 1.0, 3.0)
    field = jnp.exp(-0.5 * jnp.sum(jnp.square(X[:, None] - bumps), -1) / width**2) @ amp
    y = 12.0 + field + 0.3 * jax.random.normal(k_noise, (total,), dtype)
    return _split(key, X, y, None, num_test)


DATA_FORMATS = {".npz": "arrays X, y and optionally Xt, yt",
                ".csv": "a header row naming the columns: the label column y, every other column a feature"}


def _check_format(path: str, arg: str) -> str:
    ext = os.path.splitext(path)[1].lower()
    if ext not in DATA_FORMATS:
        supported = "; ".join(f"{k} with {v}" for k, v in DATA_FORMATS.items())
        got = f"extension {ext!r}" if ext else "no extension"
        raise ValueError(f"{arg}: {path!r} has {got}; supported data files: {supported}")
    return ext


def load_npz(path: str | os.PathLike, dtype=jnp.float32, *, arg: str = "path") -> Dataset:
    """Load a dataset saved as `.npz` with keys X, y and optionally Xt, yt (the papers' format)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ValueError(f"{arg}: no such file {path!r}")
    if not zipfile.is_zipfile(path):  # np.load would try it as a pickle and say so, misleadingly
        raise ValueError(f"{arg}: {path!r} is not an .npz archive (a zip of .npy arrays, as np.savez writes); "
                         f"for a CSV file use the .csv extension")
    with np.load(path) as f:
        missing = [k for k in ("X", "y") if k not in f]
        if missing:
            raise ValueError(f"{arg}: {path!r} lacks key(s) {missing}; expected X, y (and Xt, yt)")
        arrays = {k: jnp.asarray(f[k], dtype) for k in ("X", "y", "Xt", "yt") if k in f}
    if arrays["X"].ndim != 2:
        raise ValueError(f"{arg}: X in {path!r} must be 2-D, got shape {arrays['X'].shape}")
    _validate.check_data((arrays["X"], arrays["y"]), f"data in {path!r}")
    if ("Xt" in arrays) != ("yt" in arrays):
        raise ValueError(f"{arg}: {path!r} holds only one of Xt, yt; held-out rows need both")
    if "Xt" in arrays:
        _validate.check_data((arrays["Xt"], arrays["yt"]), f"test data (Xt, yt) in {path!r}")
    return Dataset(arrays["X"], arrays["y"], arrays.get("Xt"), arrays.get("yt"))


# --------------------------------------------------------------------------------------------------------
# CSV files.


def _letter(j: int) -> str:
    """Spreadsheet column letter of the 0-based column j: A, ..., Z, AA, AB, ..."""
    out = ""
    j += 1
    while j:
        j, r = divmod(j - 1, 26)
        out = chr(ord("A") + r) + out
    return out


def _blank(record: list) -> bool:
    return not record or (len(record) == 1 and not record[0].strip())


def _number(cell: str) -> Optional[float]:
    """The cell's value, or None when it is not a plain number (underscores, as in 1_000, are refused)."""
    text = cell.strip()
    if not text or "_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _read_header(path: str, label: str, arg: str) -> list:
    """The column names of row 1, checked: none empty, none twice, one of them the label."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            first, row = None, 0
            for row, record in enumerate(csv.reader(f), start=1):
                if not _blank(record):
                    first = record
                    break
    except UnicodeDecodeError as err:
        raise ValueError(f"{arg}: {path!r} is not UTF-8 text ({err.reason} at byte {err.start}); save it as "
                         f"CSV UTF-8") from None
    except csv.Error as err:
        raise ValueError(f"{arg}: {path!r} is not valid CSV: {err}") from None
    if first is not None and row > 1:
        raise ValueError(f"{arg}: {path!r}, row 1 is blank; the header row naming the columns must be row 1")
    if first is None:
        raise ValueError(f"{arg}: {path!r} is empty; expected a header row (row 1) naming the columns, the "
                         f"label column {label!r} among them, then one row per datum")
    header = [name.strip() for name in first]
    if label not in header:
        numeric = all(_number(name) is not None for name in header)
        hint = (" Row 1 holds numbers: the file seems to have no header row; add one naming the columns."
                if numeric else
                " Is the file separated by something other than commas?"
                if len(header) == 1 and any(c in header[0] for c in ";\t|") else
                f" Name the label column {label!r}, or give the label column's name (the label argument, "
                f"data.label in a config).")
        raise ValueError(f"{arg}: {path!r} has no label column {label!r} in its header (row 1); its columns: "
                         f"{', '.join(header)}.{hint}")
    for j, name in enumerate(header):
        if not name:
            raise ValueError(f"{arg}: {path!r}, row 1, column {_letter(j)}: empty column name; every column "
                             f"needs a name in the header row")
        if name in header[:j]:
            raise ValueError(f"{arg}: {path!r}, row 1: the column name {name!r} appears twice (columns "
                             f"{_letter(header.index(name))} and {_letter(j)})")
    return header


def _read_rows_exact(path: str, header: list, arg: str) -> np.ndarray:
    """The (rows, columns) float64 values, cell by cell; each mistake named by file, row and column."""
    def where(row, j=None):
        cell = f", column {header[j]!r} ({_letter(j)})" if j is not None else ""
        return f"{arg}: {path!r}, row {row}{cell}"

    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            records = list(csv.reader(f))
    except UnicodeDecodeError as err:
        raise ValueError(f"{arg}: {path!r} is not UTF-8 text ({err.reason} at byte {err.start}); save it as "
                         f"CSV UTF-8") from None
    except csv.Error as err:
        raise ValueError(f"{arg}: {path!r} is not valid CSV: {err}") from None
    values, width = [], len(header)
    for i, record in enumerate(records[1:], start=2):
        if _blank(record):
            continue
        if len(record) != width:
            raise ValueError(f"{where(i)}: {len(record)} cells, but the header (row 1) has {width} columns "
                             f"({', '.join(header)})")
        row = []
        for j, cell in enumerate(record):
            x = _number(cell)
            if x is None:
                what = "empty cell" if not cell.strip() else f"{cell.strip()!r} is not a number"
                raise ValueError(f"{where(i, j)}: {what}")
            if not np.isfinite(x):
                raise ValueError(f"{where(i, j)}: {cell.strip()!r} is not a finite number")
            row.append(x)
        values.append(row)
    if not values:
        raise ValueError(f"{arg}: {path!r} has a header (row 1) but no data rows")
    return np.asarray(values, np.float64)


def _read_csv(path: str, label: str, arg: str) -> tuple[list, np.ndarray]:
    """(column names, values): the header checked first, then NumPy's fast reader; where it refuses the
    rows or finds a non-finite value, the exact reader (`_read_rows_exact`) names the row and column."""
    if not os.path.exists(path):
        raise ValueError(f"{arg}: no such file {path!r}")
    if os.path.isdir(path):
        raise ValueError(f"{arg}: {path!r} is a folder; give a .csv file")
    header = _read_header(path, label, arg)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "input contained no data": the exact reader says it
            values = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2, comments=None, encoding="utf-8-sig",
                                quotechar='"', dtype=np.float64)
        if values.shape[0] >= 1 and values.shape[1] == len(header) and np.all(np.isfinite(values)):
            return header, values
    except (ValueError, UnicodeDecodeError):
        pass
    return header, _read_rows_exact(path, header, arg)


def load_csv(path: str | os.PathLike, label: str = "y", dtype=jnp.float32, *, arg: str = "path") -> Dataset:
    """Load a CSV file with a header row: the column named `label` is y, every other column (in the file's
    order) a feature of X, shape (N, D). No intercept column is added (see `load_file`).

    Every mistake raises ValueError naming the file, the row (1-based as in a spreadsheet: the header is row
    1) and the column (its header name and letter): a cell that is empty, not a number, or not finite; a row
    with more or fewer cells than the header; a missing label column; an empty file or one without data
    rows. `arg` names the argument in the message ("path").
    """
    path = os.fspath(path)
    header, values = _read_csv(path, label, arg)
    j = header.index(label)
    features = [k for k in range(len(header)) if k != j]
    return Dataset(jnp.asarray(values[:, features], dtype), jnp.asarray(values[:, j], dtype))


def _feature_names(path: str, label: str) -> Optional[list]:
    """The feature columns' names of a CSV file (None for .npz)."""
    if os.path.splitext(path)[1].lower() != ".csv":
        return None
    with open(path, newline="", encoding="utf-8-sig") as f:
        header = [name.strip() for name in next(csv.reader(f), [])]
    return [name for name in header if name != label]


def _load_one(path, label, dtype, arg) -> Dataset:
    path = os.fspath(path)
    ext = _check_format(path, arg)
    if ext == ".csv":
        return load_csv(path, label, dtype, arg=arg)
    return load_npz(path, dtype, arg=arg)


def load_file(path: str | os.PathLike, *, label: str = "y", intercept: bool = False, num_test: int = 0,
              test_path: Optional[str | os.PathLike] = None, dtype=jnp.float32) -> Dataset:
    """A dataset from a `.npz` or `.csv` file (`load_npz`, `load_csv`; any other extension raises ValueError
    listing the supported ones).

    Args:
      label: name of a CSV file's label column (an .npz file names its arrays X, y).
      intercept: append a column of ones to X (and to the held-out rows' X), as the last column.
      num_test: hold out the last `num_test` rows as test data.
      test_path: held-out rows from a second file of either format (a CSV file with the same columns, in
        any order; an .npz file's X, y).

    Held-out rows come from one place only: `test_path`, `num_test`, or an .npz file's own Xt, yt.
    """
    path = os.fspath(path)
    ds = _load_one(path, label, dtype, "path")
    num_test = _validate.check_nonneg_int(num_test, "num_test")
    if ds.Xt is not None and (num_test or test_path is not None):
        raise ValueError(f"num_test, test_path: {path!r} holds its own held-out rows (Xt, yt); give the "
                         f"held-out rows in one place only")
    if num_test and test_path is not None:
        raise ValueError("num_test, test_path: give the held-out rows in one place only")
    X, y, Xt, yt = ds.X, ds.y, ds.Xt, ds.yt
    if num_test:
        n = int(X.shape[0])
        if num_test >= n:
            raise ValueError(f"num_test: {num_test} held-out rows leave no training rows ({path!r} has {n})")
        X, y, Xt, yt = X[:-num_test], y[:-num_test], X[-num_test:], y[-num_test:]
    if test_path is not None:
        test_path = os.fspath(test_path)
        test = _load_one(test_path, label, dtype, "test_path")
        if test.Xt is not None:
            raise ValueError(f"test_path: {test_path!r} holds held-out rows (Xt, yt) itself; give a file "
                             f"with X, y")
        Xt, yt = test.X, test.y
        names, test_names = _feature_names(path, label), _feature_names(test_path, label)
        if names is not None and test_names is not None:
            if sorted(names) != sorted(test_names):
                missing = [c for c in names if c not in test_names]
                extra = [c for c in test_names if c not in names]
                raise ValueError(f"test_path: {test_path!r} has other feature columns than {path!r}"
                                 + (f"; missing: {', '.join(missing)}" if missing else "")
                                 + (f"; not in the training file: {', '.join(extra)}" if extra else ""))
            Xt = Xt[:, np.asarray([test_names.index(c) for c in names], dtype=np.int64)]
        if Xt.shape[1] != X.shape[1]:
            raise ValueError(f"test_path: {test_path!r} has {Xt.shape[1]} feature columns, {path!r} has "
                             f"{X.shape[1]}")
    if intercept:
        X = jnp.concatenate([X, jnp.ones((X.shape[0], 1), X.dtype)], axis=1)
        if Xt is not None:
            Xt = jnp.concatenate([Xt, jnp.ones((Xt.shape[0], 1), Xt.dtype)], axis=1)
    if X.shape[1] == 0:
        raise ValueError(f"path: {path!r} has no feature columns (every column other than the label {label!r} "
                         f"is a feature); add some, or an intercept column (the intercept argument, "
                         f"data.intercept in a config)")
    return Dataset(X, y, Xt, yt)
