"""Numerical range: V x 10^k, k in -30..30, gives the coreset of V for every registered solver (issue 15).

The vector-sum problem is invariant to scaling V; `cj.build` brings max |v| into [2^-20, 2^20] by an exact
power of two before solving, so float32 neither overflows (1e30^2) nor underflows (1e-30^2).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import coresets_jax as cj

pytestmark = [pytest.mark.slow]

V0 = np.asarray(jax.random.normal(jax.random.key(0), (80, 30)) + 0.5, np.float32)  # M < J: no near-ties
KEY = jax.random.key(1)
REFERENCE = {m: cj.build(jnp.asarray(V0), 8, m, key=KEY) for m in cj.METHODS}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.integers(-30, 30))
def test_every_solver_gives_the_same_coreset_for_V_times_10_to_the_k(k):
    V = jnp.asarray(V0 * np.float32(10.0 ** k))  # rounded once to float32, as a user's data would be
    assert bool(jnp.all(jnp.isfinite(V)))
    for method, ref in REFERENCE.items():
        cs = cj.build(V, 8, method, key=KEY)
        np.testing.assert_array_equal(np.sort(np.asarray(cs.indices)[np.asarray(cs.weights) > 0]),
                                      np.sort(np.asarray(ref.indices)[np.asarray(ref.weights) > 0]), err_msg=method)
        np.testing.assert_allclose(np.asarray(cs.dense(80)), np.asarray(ref.dense(80)), rtol=2e-3, atol=1e-6,
                                   err_msg=method)
        assert float(cj.relative_error(V, cs)) == pytest.approx(float(cj.relative_error(jnp.asarray(V0), ref)),
                                                                rel=2e-3, abs=1e-6)
