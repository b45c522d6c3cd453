"""Shared check for the posterior-driven methods through `cj.merged_coreset` and `cj.stream_coreset`."""

import jax
import numpy as np

import coresets_jax as cj


def check_merged_is_the_union_of_shard_runs(model, data, method, size, num_shards, key, **opts):
    """`merged_coreset` (HC §4.3) is the union of the method's pure core run on each contiguous shard: shard c
    with key `split(split(key, 3)[2], C)[c]` and the method's start (the Laplace fit of all the data, or the model's
    zero theta for a method that needs no pi_hat), its
    slots [cM, (c+1)M) holding global row numbers of shard c. Checked against C separate `cj.coreset_fn`
    calls (the merged call vmaps them, so the weights agree to float32 rounding, not bit for bit)."""
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    rows = n // num_shards
    merged = cj.merged_coreset(None, size, num_shards, method, key, model=model, data=data, **opts)
    k_pi, _, k_solve = jax.random.split(key, 3)
    if cj.methods()[method].uses_pi_hat:
        approx = cj.laplace(model, data, key=k_pi)
        start = cj.Start(approx.mean, approx.cov)
    else:  # the published methods start from the model's zero theta, with no full-data pass
        start = None
    solve = jax.jit(cj.coreset_fn(model, method, size, **opts))
    for c, k in enumerate(jax.random.split(k_solve, num_shards)):
        shard = jax.tree_util.tree_map(lambda a: a[rows * c:rows * (c + 1)], data)
        alone = solve(k, shard, start)
        slots = slice(size * c, size * (c + 1))
        w_merged, w_alone = np.asarray(merged.weights[slots]), np.asarray(alone.weights)
        live = w_alone > 0
        np.testing.assert_array_equal(np.asarray(merged.indices[slots])[live], np.asarray(alone.indices)[live] + rows * c)
        np.testing.assert_allclose(w_merged, w_alone, rtol=1e-3, atol=1e-4 * w_alone.max())
    return merged


def check_streamed(streamed, n, size):
    """The streamed coreset: `size` slots of distinct global rows in [0, N), non-negative finite weights."""
    w, idx = np.asarray(streamed.weights), np.asarray(streamed.indices)
    assert streamed.capacity == size
    assert np.all(np.isfinite(w)) and np.all(w >= 0) and w.sum() > 0
    live = idx[w > 0]
    assert np.all((live >= 0) & (live < n)) and len(np.unique(live)) == len(live)
