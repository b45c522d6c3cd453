"""Sparse VI (Campbell & Beronov 2019; IHT §5 baseline) with exact samples of pi_w on the Gaussian model."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj


@pytest.mark.slow
def test_sparse_vi_gaussian_beats_uniform_and_respects_constraints():
    D, N, M = 5, 100, 10
    y = cj.data.synthetic_gaussian(jax.random.key(0), N, dim=D, mean=jnp.ones(D))
    model = cj.models.gaussian_mean(D)
    mean, cov = cj.models.gaussian_mean_posterior(y)
    kl = lambda w: float(cj.metrics.gaussian_kl(mean, cov, *cj.models.gaussian_mean_posterior(y, w)))
    svi, unif = [], []
    for seed in range(3):
        cs = cj.coreset(model, y, M, "sparse_vi", key=jax.random.key(seed), num_draws=50, num_iters=50,
                        step_scale=0.1)
        w = np.asarray(cs.weights)
        assert np.all(w >= 0) and np.all(np.isfinite(w)) and cs.num_points <= M
        assert len(set(np.asarray(cs.indices)[w > 0].tolist())) == cs.num_points
        svi.append(kl(cs.dense(N)))
        unif.append(kl(cj.build(jnp.ones((N, 2)), M, "uniform", key=jax.random.key(seed)).dense(N)))
    assert np.median(svi) < np.median(unif), (svi, unif)


def test_sparse_vi_options_are_checked():
    model = cj.models.gaussian_mean(2)
    y = jnp.zeros((10, 2))
    with pytest.raises(ValueError, match="kernel"):
        cj.coreset(model, y, 2, "sparse_vi", kernel="gibbs")
    with pytest.raises(ValueError, match="num_iters"):
        cj.coreset(model, y, 2, "sparse_vi", num_iters=0)
    with pytest.raises(ValueError, match="method"):
        cj.build(jnp.ones((10, 2)), 2, "sparse_vi")  # needs the model: cj.coreset only


def test_a_diverging_weight_step_stops_at_the_last_finite_coreset_and_warns():
    # The published step step_scale / t, made huge: the weights overflow float32 after a few selection steps
    # (step 3 under JAX 0.10, step 5 under JAX 0.11, whose random streams differ). Before, cj.coreset raised
    # "produced non-finite weights; please report this"; now the run keeps its last finite iterate, stops adding
    # points, and says so. A step that diverges before any weight is positive raises.
    import re

    y = cj.data.synthetic_gaussian(jax.random.key(0), 500, 3)
    model = cj.models.gaussian_mean(3)
    with pytest.warns(RuntimeWarning, match=r"selection step \d+ gave non-finite weights .* last finite coreset") \
            as caught:
        cs = cj.coreset(model, y, 6, "sparse_vi", key=jax.random.key(0), step_scale=1e32, num_iters=3)
    said = re.search(r"selection step (\d+) .* last finite coreset \((\d+) points?\)", str(caught[0].message))
    step, points = int(said.group(1)), int(said.group(2))
    w = np.asarray(cs.weights)
    assert 2 <= step < 6 and np.all(np.isfinite(w)) and np.all(w >= 0)
    assert int(cs.info["diverged_at"]) == step - 1 and cs.num_points == points
    assert 1 <= cs.num_points <= int(cs.info["num_selected"]) == step  # nothing was added after the divergence
    with pytest.raises(FloatingPointError, match="no coreset to return"):
        cj.coreset(model, y, 6, "sparse_vi", key=jax.random.key(0), step_scale=1e37, num_iters=3)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the published settings here: no divergence, no warning
        cs = cj.coreset(model, y, 6, "sparse_vi", key=jax.random.key(0), num_iters=3)
    assert int(cs.info["diverged_at"]) == -1 and int(cs.info["num_selected"]) == 6
