"""`cj.sample` runs a coreset's chains on the host CPU when the data lives on an accelerator.

No accelerator here: a process with two CPU devices stands in, device 0 for the accelerator that holds the data
and device 1 for the host (`sample._chain_device` patched to say so). The checks: the chains ran on the "host",
the draws come back on the data's device, and they are bit-identical to the chains run where the data lives.
"""

import sys
import textwrap

import jax
import numpy as np
import pytest
from host_devices import run_with_host_devices

import coresets_jax  # noqa: F401 (imports the sampling module for the rule's test)

SCRIPT = textwrap.dedent(r"""
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    import coresets_jax as cj
    mod = sys.modules["coresets_jax.inference.sample"]
    accelerator, host = jax.devices()[:2]
    model = cj.models.logistic_regression()
    ds = cj.data.synthetic_logistic(jax.random.key(1), 2000)
    data = jax.device_put(ds.train, accelerator)
    cs = cj.coreset(model, data, size=30, method="omp", key=jax.random.key(0))
    kw = dict(num_samples=60, num_warmup=60, num_chains=2, warn=False)
    out = {}

    ran_on = []
    run_chains = mod._run_chains
    def spy(model, rows, w, key, *rest):
        ran_on.append(sorted(str(d) for leaf in jax.tree_util.tree_leaves((rows, w, key)) for d in leaf.devices()))
        return run_chains(model, rows, w, key, *rest)
    mod._run_chains = spy
    chain_device = mod._chain_device

    where_data_lives = cj.sample(model, data, jax.random.key(3), weights=cs, **kw)
    out["unpatched_ran_on"] = sorted(set(ran_on.pop()))
    mod._chain_device = lambda rows: (host, accelerator)
    on_host = cj.sample(model, data, jax.random.key(3), weights=cs, init=jnp.zeros(3), **kw)
    out["patched_ran_on"] = sorted(set(ran_on.pop()))
    out["draws_on"] = sorted(str(d) for d in on_host.samples.devices())
    out["stats_on"] = sorted({str(d) for leaf in jax.tree_util.tree_leaves(on_host.stats) for d in leaf.devices()})
    again = cj.sample(model, data, jax.random.key(3), weights=cs, init=jnp.zeros(3), **kw)
    mod._chain_device = lambda rows: (None, None)
    same_init = cj.sample(model, data, jax.random.key(3), weights=cs, init=jnp.zeros(3), **kw)
    out["identical"] = bool(np.array_equal(np.asarray(again.samples), np.asarray(same_init.samples)))
    out["identical_default_init"] = bool(np.array_equal(np.asarray(where_data_lives.samples),
                                                        np.asarray(cj.sample(model, data, jax.random.key(3),
                                                                             weights=cs, **kw).samples)))
    cert = cj.certify(model, data, cs, on_host.samples)
    out["certify_finite"] = bool(np.isfinite(cert.kl))

    # data sharded over both devices (a mesh of "accelerators"): the draws come back replicated over it
    mod._chain_device = chain_device
    mod._host_for = lambda devices, rows: (host, min(devices, key=lambda d: d.id))
    sharded = cj.shard(ds.train)
    on_mesh = cj.sample(model, sharded, jax.random.key(3), weights=cs, init=jnp.zeros(3), **kw)
    out["mesh_ran_on"] = sorted(set(ran_on.pop()))
    out["mesh_draws_on"] = sorted(str(d) for d in on_mesh.samples.devices())
    out["mesh_replicated"] = bool(on_mesh.samples.sharding.is_fully_replicated)
    out["mesh_identical"] = bool(np.array_equal(np.asarray(on_mesh.samples), np.asarray(again.samples)))
    cert = cj.certify(model, sharded, cs, on_mesh.samples)
    out["mesh_certify_finite"] = bool(np.isfinite(cert.kl))
    print("JSON" + json.dumps(out))
""")


@pytest.fixture(scope="module")
def two_devices():
    return run_with_host_devices(SCRIPT, 2, CORESETS_JAX_PROGRESS="0")


@pytest.mark.slow  # a fresh process with two devices
def test_chains_run_on_the_host_and_the_draws_come_back(two_devices):
    assert two_devices["unpatched_ran_on"] == ["cpu:0"]  # a CPU's data: the chains stay there
    assert two_devices["patched_ran_on"] == ["cpu:1"]
    assert two_devices["draws_on"] == ["cpu:0"]
    assert two_devices["stats_on"] == ["cpu:0"]
    assert two_devices["certify_finite"]


@pytest.mark.slow  # a fresh process with two devices
def test_sharded_data_gets_its_draws_back_replicated(two_devices):
    assert two_devices["mesh_ran_on"] == ["cpu:1"]
    assert two_devices["mesh_draws_on"] == ["cpu:0", "cpu:1"]
    assert two_devices["mesh_replicated"]
    assert two_devices["mesh_identical"]
    assert two_devices["mesh_certify_finite"]


@pytest.mark.slow  # a fresh process with two devices
def test_host_chains_give_the_same_draws(two_devices):
    assert two_devices["identical"]
    assert two_devices["identical_default_init"]


class _Device:
    def __init__(self, platform, id):
        self.platform, self.id = platform, id


def test_the_rule_moves_only_small_coresets_off_an_accelerator(monkeypatch):
    mod = sys.modules["coresets_jax.inference.sample"]
    gpus = {_Device("gpu", 1), _Device("gpu", 0)}
    host, home = mod._host_for(gpus, 100)
    assert host == jax.devices("cpu")[0] and (home.platform, home.id) == ("gpu", 0)
    assert mod._host_for(gpus, mod.HOST_CHAIN_ROWS) != (None, None)
    assert mod._host_for(gpus, mod.HOST_CHAIN_ROWS + 1) == (None, None)  # a large coreset stays
    assert mod._host_for({_Device("cpu", 0)}, 100) == (None, None)  # on the host already
    assert mod._chain_device({"x": jax.numpy.zeros((100, 3))}) == (None, None)
    assert mod._chain_device({"x": np.zeros((100, 3))}) == (None, None)  # NumPy: JAX's default device, a CPU
    assert mod._chain_device({}) == (None, None)
    monkeypatch.setattr(mod, "HOST_CHAIN_ROWS", 0)  # off
    assert mod._host_for(gpus, 100) == (None, None)
    monkeypatch.setattr(mod, "_host_for", lambda devices, rows: (sorted(d.platform for d in devices), rows))
    assert mod._chain_device({"x": np.zeros((7, 3))}) == (["cpu"], 7)  # NumPy rows: the default device's
