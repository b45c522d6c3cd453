"""Sensitivity coresets: LR Lemma 3.1 / Algorithm 1 and HC Eq. 6.3."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax import sensitivity as S
from coresets_jax.sensitivity import sampling


def _logistic_2d(key, n):
    """A small 2-D dataset without intercept, so theta lives in a 2-D ball we can grid."""
    kx, ky = jax.random.split(key)
    X = jax.random.normal(kx, (n, 2)) * jnp.array([1.0, 0.5]) + jnp.array([0.5, 0.0])
    y = jnp.where(jax.random.uniform(ky, (n,)) < jax.nn.sigmoid(X @ jnp.array([2.0, -1.0])), 1.0, -1.0)
    return X, y


def _brute_force_sensitivity(data, radius, num_r=61, num_angle=721):
    """sigma_n(B_R) = sup_{||theta|| <= R} N phi(Z_n . theta) / sum_l phi(Z_l . theta) on a polar grid."""
    X, y = (np.asarray(a, np.float64) for a in data)
    Z = y[:, None] * X
    r = np.linspace(0.0, radius, num_r)
    ang = np.linspace(0.0, 2 * np.pi, num_angle)
    thetas = np.stack([np.outer(r, np.cos(ang)).ravel(), np.outer(r, np.sin(ang)).ravel()], 1)
    phi = np.logaddexp(0.0, -(Z @ thetas.T))  # (N, G), phi(s) = log(1 + exp(-s))
    return np.max(len(Z) * phi / phi.sum(0, keepdims=True), axis=1)


@pytest.mark.slow
@pytest.mark.parametrize("radius", [1.0, 2.5])
def test_lemma_3_1_bound_dominates_brute_force_sensitivity(radius):
    data = _logistic_2d(jax.random.key(0), 80)
    sigma = _brute_force_sensitivity(data, radius)
    m, info = S.logistic_sensitivity(data, jax.random.key(1), k=3, radius=radius, centers="exact")
    m = np.asarray(m, np.float64)
    assert float(info["radius"]) == pytest.approx(radius)
    assert sigma.max() > 2.0  # a non-trivial problem: some points matter much more than average
    assert np.all(m >= sigma * (1 - 1e-5)), (m / sigma).min()
    assert np.all((m >= 1 - 1e-6) & (m <= len(m) + 1e-3))


@pytest.mark.slow
def test_lemma_3_1_bound_with_default_radius_and_one_cluster():
    # k = 1: the clustering is trivially every point, and Lemma 3.1 must still dominate.
    data = _logistic_2d(jax.random.key(3), 60)
    m, info = S.logistic_sensitivity(data, jax.random.key(4), k=1, a=3.0, centers="exact")
    radius = float(info["radius"])
    assert radius == pytest.approx(3.0 / math.sqrt(float(info["kmeans_score"])), rel=1e-5)
    sigma = _brute_force_sensitivity(data, radius)
    assert np.all(np.asarray(m, np.float64) >= sigma * (1 - 1e-5))


def _bounded_logistic(key, n):
    kx, ky = jax.random.split(key)
    X = jnp.concatenate([jax.random.uniform(kx, (n, 2), minval=-1, maxval=1), jnp.ones((n, 1))], 1)
    y = jnp.where(jax.random.uniform(ky, (n,)) < jax.nn.sigmoid(X @ jnp.array([3.0, 3.0, 0.0])), 1.0, -1.0)
    return X, y


@pytest.mark.slow
def test_mean_sensitivity_flat_in_n():
    # LR Fig. 1b: at fixed R and k the mean sensitivity bound stays flat as N grows. Averaged over two
    # seeds; a loose factor 1.5 allows for k-means++ landing in different local optima. The k-means
    # subsample is fixed at 1000 rows so that one compilation serves every N.
    means = []
    for n in (1_000, 10_000, 100_000):
        vals = [float(S.logistic_sensitivity(_bounded_logistic(jax.random.key(s), n), jax.random.key(10 + s),
                                             k=6, radius=3.0, subsample=1000)[1]["mean_sensitivity"])
                for s in range(2)]
        means.append(np.mean(vals))
    assert max(means) / min(means) < 1.5, means
    assert min(means) > 1.0


@pytest.mark.slow
def test_sensitivity_sample_is_unbiased():
    m = jnp.array([1.0, 2.0, 5.0, 0.5, 10.0, 3.0])
    size = 4

    def dense(key):
        indices, weights = sampling.sensitivity_sample_core(key, m, size)
        return jnp.zeros(m.shape[0]).at[indices].add(weights)

    keys = jax.random.split(jax.random.key(0), 4000)
    w = np.asarray(jax.vmap(dense)(keys))
    # E[gamma_n] = 1 (Alg. 1 line 11); the standard error of each mean is below 0.04 here.
    np.testing.assert_allclose(w.mean(0), 1.0, atol=0.15)
    assert w.std(0).min() > 0.1  # the draws are random
    # Each draw contributes total / (m_n M): the weights' total matches sum_n K_n / (p_n M).
    cs = S.sensitivity_sample(m, size, keys[0])
    assert float(jnp.sum(cs.weights * m[cs.indices])) == pytest.approx(float(jnp.sum(m)), rel=1e-5)


@pytest.mark.slow
def test_sensitivity_coreset_api_and_size_from_tolerance():
    ds = cj.data.synthetic_logistic(jax.random.key(2), 5_000)
    key = jax.random.key(0)
    cs = cj.sensitivity_coreset(ds.train, size=200, key=key, k=6, a=3.0)
    assert cs.capacity == 200 and 0 < cs.num_points <= 200
    assert bool(jnp.all(cs.weights >= 0)) and int(cs.indices.max()) < 5_000
    # Unbiased estimate of N: within a loose factor of the truth for one draw.
    assert 0.3 * 5_000 < float(jnp.sum(cs.weights)) < 3 * 5_000
    # Alg. 1 line 5.
    eps, delta = 2.0, 0.1
    cs2 = cj.sensitivity_coreset(ds.train, None, key, epsilon=eps, delta=delta)
    mbar = float(cs2.info["sensitivity_mean"])
    expected = math.ceil(mbar / eps**2 * ((3 + 1) * math.log(mbar) + math.log(1 / delta)))
    assert cs2.capacity == expected == int(cs2.info["size"])
    with pytest.raises(ValueError, match="epsilon"):
        cj.sensitivity_coreset(ds.train, None, key)
    with pytest.raises(ValueError, match="size"):
        cj.sensitivity_coreset(ds.train, 0, key)
    with pytest.raises(ValueError, match="labels"):
        cj.sensitivity_coreset((ds.X, jnp.abs(ds.y) * 0.5), 10, key)
    with pytest.raises(ValueError, match="centers"):
        cj.sensitivity_coreset(ds.train, 10, key, centers="median")


@pytest.mark.slow
def test_kmeans_recovers_separated_clusters():
    key = jax.random.key(5)
    true = jnp.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    Z = jnp.repeat(true, 400, axis=0) + 0.1 * jax.random.normal(key, (1200, 2))
    km = S.kmeans(Z, 3, jax.random.key(6), subsample=300)
    found = np.sort(np.asarray(km.centers), axis=0)
    np.testing.assert_allclose(found, np.sort(np.asarray(true), axis=0), atol=0.1)
    assert sorted(np.asarray(km.counts).tolist()) == [400, 400, 400]
    assert float(km.score) == pytest.approx(0.02, rel=0.2)  # E||noise||^2 = 2 * 0.1^2


def test_gaussian_mean_sensitivity_is_the_exact_supremum():
    # HC Eq. 6.3 / App. C: N sigma_n = sup_mu N ||y_n - mu||^2 / sum_m ||y_m - mu||^2.
    y = cj.data.synthetic_gaussian(jax.random.key(0), 50, dim=2)
    sens = np.asarray(S.gaussian_mean_sensitivity(y), np.float64)
    assert sens.sum() == pytest.approx(2.0, rel=1e-5)
    Y = np.asarray(y, np.float64)
    ybar = Y.mean(0)
    lam = np.linspace(-50, 50, 20001)
    for n in (0, 7, 31):
        mus = lam[:, None] * ybar + (1 - lam[:, None]) * Y[n]
        num = np.sum((Y[n] - mus) ** 2, 1)
        den = np.sum((Y[None] - mus[:, None]) ** 2, 2).sum(1)
        sup = np.max(num / den)
        assert sens[n] == pytest.approx(sup, rel=1e-3)
        rand = np.random.default_rng(n).normal(size=(2000, 2)) * 3
        ratio = np.sum((Y[n] - rand) ** 2, 1) / np.sum((Y[None] - rand[:, None]) ** 2, 2).sum(1)
        assert ratio.max() <= sens[n] * (1 + 1e-6)


def test_gaussian_mean_coreset():
    y = cj.data.synthetic_gaussian(jax.random.key(1), 1000)
    cs = S.gaussian_mean_coreset(y, 100, jax.random.key(2))
    assert cs.method == "unif" and cs.capacity == 100
    assert 300 < float(jnp.sum(cs.weights)) < 3000
    with pytest.raises(ValueError, match="identical"):
        S.gaussian_mean_sensitivity(jnp.ones((5, 2)))


def test_sensitivity_is_a_registered_construction_equal_to_sensitivity_coreset():
    # Issue 23: LR Algorithm 1 runs through cj.coreset (and merged/stream) like any other method; its core is
    # the same computation as the public sensitivity_coreset with the key cj.coreset hands its solver.
    ds = cj.data.synthetic_logistic(jax.random.key(0), 3000)
    model, key = cj.models.logistic_regression(), jax.random.key(5)
    assert "sensitivity" in cj.POSTERIOR_METHODS and cj.methods()["sensitivity"].random
    via_registry = cj.coreset(model, ds.train, 40, "sensitivity", key=key, k=4)
    direct = cj.sensitivity_coreset(ds.train, 40, key=jax.random.split(key, 4)[3], k=4)
    np.testing.assert_allclose(np.asarray(via_registry.dense(3000)), np.asarray(direct.dense(3000)), rtol=1e-5)
    merged = cj.merged_coreset(None, 20, 2, "sensitivity", jax.random.key(6), model=model, data=ds.train)
    assert merged.capacity == 40 and 0 < merged.num_points <= 40
    with pytest.raises(ValueError, match="logistic"):
        cj.coreset(cj.models.poisson_regression(), cj.data.synthetic_poisson(key, 300).train, 40, "sensitivity",
                   key=key)
