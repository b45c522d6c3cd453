"""`cj.coreset(..., candidate_rows=R)`: a vector method chooses among R drawn rows (half uniformly, half by
leverage) but fits the full data's sum sum_n v_n (HC Eq. 3.3), computed in one streamed pass
(`features.projection.candidate_features`)."""

import jax
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax.features.projection import feature_sum_fn

N = 6000


@pytest.fixture(scope="module")
def problem():
    ds = cj.data.synthetic_logistic(jax.random.key(0), N)
    return cj.models.logistic_regression(), ds.train


@pytest.fixture(scope="module")
def full(problem):
    """The all-rows coreset and V (N, J) with the same keys, so the same thetas and Fisher coordinates."""
    model, data = problem
    return cj.coreset(model, data, 40, "omp", jax.random.key(1), num_features=200, return_vectors=True)


def _error_np(V: np.ndarray, indices, weights) -> float:
    """||sum_n v_n - sum_m w_m v_{i_m}|| / ||sum_n v_n|| in float64 NumPy."""
    V = np.asarray(V, np.float64)
    target = V.sum(axis=0)
    approx = np.asarray(weights, np.float64) @ V[np.asarray(indices)]
    return float(np.linalg.norm(target - approx) / np.linalg.norm(target))


def test_candidates_fit_the_full_sum_not_the_scaled_subsample_sum(problem, full):
    model, data = problem
    _, V = full
    cs = cj.coreset(model, data, 40, "omp", jax.random.key(1), num_features=200, candidate_rows=1500)
    assert cs.settings["candidate_rows"] == 1500 and cs.settings["N"] == N
    idx, w = np.asarray(cs.indices), np.asarray(cs.weights)
    assert idx.min() >= 0 and idx.max() < N and np.all(w >= 0)
    # the error on every row's features (independent float64 NumPy) is what the solver reports, and small
    error = _error_np(V, idx, w)
    np.testing.assert_allclose(float(cs.info["relative_error"]), error, rtol=1e-2, atol=1e-7)
    assert error < 1e-3
    # ...while the subsample's own sum scaled by N / R is a different target: fitting it would miss the full
    # sum by far more than that (a uniform coreset of R rows in disguise)
    live = np.unique(idx[w > 0])
    rows = np.sort(np.random.default_rng(0).choice(N, 1500, replace=False))
    Vn = np.asarray(V, np.float64)
    scaled = Vn[rows].sum(0) * N / 1500
    assert np.linalg.norm(scaled - Vn.sum(0)) / np.linalg.norm(Vn.sum(0)) > 30 * error
    assert live.size <= 40


def test_every_row_as_candidate_is_the_plain_coreset(problem, full):
    model, data = problem
    cs_full, _ = full
    for every in (N, 10 * N, "all"):
        cs = cj.coreset(model, data, 40, "omp", jax.random.key(1), num_features=200, candidate_rows=every)
        np.testing.assert_array_equal(np.asarray(cs.indices), np.asarray(cs_full.indices))
        np.testing.assert_array_equal(np.asarray(cs.weights), np.asarray(cs_full.weights))
        assert "candidate_rows" not in cs.settings


def test_streamed_sum_is_the_compensated_sum_of_the_projected_rows(problem):
    """Within float32 rounding of the exact (float64) sum of the rows `cj.project` gives, for any chunking."""
    model, data = problem
    thetas = cj.laplace(model, data).sample(jax.random.key(1), 64)
    key = jax.random.key(3)
    V = np.asarray(cj.project(model, data, thetas, norm="fisher", key=key), np.float64)
    exact = V.sum(0)
    for chunk in (1000, 1700, N):
        got = np.asarray(feature_sum_fn(model, "fisher", np.dtype(np.float32), N, chunk)(key, data, thetas))
        np.testing.assert_allclose(got, exact, rtol=2e-6, atol=2e-6 * np.abs(V).sum(0).max())


@pytest.mark.parametrize("bad, kwargs, match", [
    (0, {}, "candidate_rows"),
    (True, {}, "candidate_rows"),
    ("some", {}, "candidate_rows"),
    (500, {"method": "uniform"}, "draws from every row"),
    (500, {"return_vectors": True}, "return_vectors"),
    (500, {"method": "coreset_mcmc"}, "support_rows"),
    (500, {"compress": True}, "compress"),
])
def test_bad_candidate_rows_raise_clear_errors(problem, bad, kwargs, match):
    model, data = problem
    kwargs = {"method": "omp", **kwargs}
    with pytest.raises(ValueError, match=match):
        cj.coreset(model, data, 20, key=jax.random.key(0), candidate_rows=bad, **kwargs)


@pytest.mark.slow
def test_automatic_size_on_candidates_reads_full_rows_off_the_greedy_path(problem, full):
    """Every coreset of the search, read off the greedy path over candidate rows, is indexed into the full
    data: its error on all rows' features (NumPy) equals the one it reports."""
    model, data = problem
    _, V = full
    cs = cj.coreset(model, data, key=jax.random.key(1), tol=0.1, num_features=200, candidate_rows=2000)
    assert cs.settings["candidate_rows"] == 2000 and cs.certificate is not None
    assert cs.certificate.kl <= 0.1 + 3 * cs.certificate.kl_se
    idx, w = np.asarray(cs.indices), np.asarray(cs.weights)
    assert idx.max() < N
    np.testing.assert_allclose(float(cs.info["relative_error"]), _error_np(V, idx, w), rtol=1e-2, atol=1e-7)


def test_leverage_scores_are_the_fisher_leverages_of_numpy(problem):
    """h_n = mean_k g_nk^T (G_k^T G_k)^-1 g_nk for logistic regression's per-row gradients
    g_nk = y_n sigma(-y_n x_n theta_k) x_n, in float64 NumPy; they sum to D (each term is a projection's trace)."""
    from coresets_jax.features.projection import leverage_scores
    model, (X, y) = problem
    thetas = np.array([[0.5, -1.0, 0.2], [3.0, 2.5, 0.1]], np.float32)
    h = np.asarray(leverage_scores(model, (X, y), thetas, chunk=1700), np.float64)
    Xn, yn = np.asarray(X, np.float64), np.asarray(y, np.float64)
    yn = np.where(yn > 0, 1.0, -1.0)
    expected = 0.0
    for theta in thetas.astype(np.float64):
        G = (yn / (1.0 + np.exp(yn * (Xn @ theta))))[:, None] * Xn
        expected = expected + np.einsum("nd,de,ne->n", G, np.linalg.inv(G.T @ G), G) / len(thetas)
    np.testing.assert_allclose(h, expected, rtol=2e-3, atol=1e-7)
    assert abs(h.sum() - X.shape[1]) < 1e-2


def test_rows_that_carry_a_rare_covariate_are_candidates_far_more_often_than_uniformly():
    """A binary covariate set on 3 rows of 4,000: a uniform 10% subsample holds each with probability 0.1 and
    misses all three with probability 0.73. The leverage half of the draw holds them in at least 80% of draws
    and at least one in every draw, and the coreset's error on all rows stays at the all-rows level."""
    from coresets_jax.construct.pipeline import _candidate_rows
    rng = np.random.default_rng(0)
    n = 4000
    X = np.column_stack([rng.standard_normal((n, 2)), np.zeros(n), np.ones(n)]).astype(np.float32)
    rare = np.array([11, 1999, 3500])
    X[rare, 2] = 1.0
    theta = np.array([1.0, -0.5, 4.0, 0.3])
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-X @ theta)), 1.0, -1.0).astype(np.float32)
    model, data = cj.models.logistic_regression(), (jax.numpy.asarray(X), jax.numpy.asarray(y))
    thetas = cj.laplace(model, data).sample(jax.random.key(1), 64)
    held = []
    for seed in range(20):
        rows = np.asarray(_candidate_rows(model, data, thetas, jax.random.key(seed), 400))
        assert rows.shape == (400,) and np.all(np.diff(rows) > 0)
        held.append(np.isin(rare, rows))
    held = np.array(held)
    assert held.mean() >= 0.8 and held.any(axis=1).all(), held.mean(axis=0)
    key = jax.random.key(2)
    cs_all, V = cj.coreset(model, data, 60, "omp", key, num_features=200, return_vectors=True)
    cs = cj.coreset(model, data, 60, "omp", key, num_features=200, candidate_rows=400)
    assert _error_np(V, cs.indices, cs.weights) <= 3 * _error_np(V, cs_all.indices, cs_all.weights) + 1e-6
