"""One set of option names across the posterior-driven methods (issue 23): the old names are aliases that give
exactly the new names' results; both together, or an unknown name, raise ValueError."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax.cli.config import ConfigError, validate_config
from coresets_jax.posterior_driven.options import ALIASES

SHARED = ("kernel", "kernel_settings", "num_iters", "num_draws", "num_warmup")


def tiny():
    model = cj.models.gaussian_mean(2)
    y = cj.data.synthetic_gaussian(jax.random.key(0), 20, dim=2, mean=jnp.ones(2))
    return model, y


def run(method, **options):
    model, y = tiny()
    cs = cj.coreset(model, y, 3, method, key=jax.random.key(3), **options)
    return np.asarray(cs.indices), np.asarray(cs.weights)


def same(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b))


def test_every_method_has_the_shared_names_and_every_alias_names_one_of_them():
    for method in ("sparse_vi", "quasi_newton", "coreset_mcmc"):
        construction = cj.registry.resolve(method)
        assert set(SHARED) <= set(construction.options), method
        assert construction.aliases == ALIASES[method]
        for old, new in construction.aliases:
            assert old not in construction.options and new in construction.options
    assert dict(ALIASES["sparse_vi"]) == {"sampler": "kernel", "weight_iters": "num_iters", "num_samples": "num_draws"}
    assert dict(ALIASES["quasi_newton"]) == {"num_steps": "num_iters"}


@pytest.mark.parametrize("method,old,new", [(m, o, n) for m, pairs in ALIASES.items() for o, n in pairs])
def test_an_alias_validates_to_the_new_name(method, old, new):
    construction = cj.registry.resolve(method)
    value = "rwmh" if new == "kernel" else 7
    assert construction.check_options({old: value}) == construction.check_options({new: value}) == ((new, value),)
    with pytest.raises(ValueError, match=f"{old}, {new}"):
        construction.check_options({old: value, new: value})


# Sparse VI on the Gaussian mean: exact draws unless a kernel is given; each case differs from BASE in the
# aliased option, so an alias mapped to the wrong option (or dropped) changes the weights.
BASE = dict(num_iters=3, num_draws=5)
SPARSE_VI_CASES = [("weight_iters", "num_iters", 4, {}), ("num_samples", "num_draws", 6, {}),
                   ("sampler", "kernel", "rwmh", dict(num_iters=2, num_draws=4, num_warmup=10))]


@pytest.mark.parametrize("old,new,value,extra", SPARSE_VI_CASES)
def test_sparse_vi_alias_gives_the_same_weights(old, new, value, extra):
    options = {**BASE, **extra}
    options.pop(new, None)
    with_new = run("sparse_vi", **options, **{new: value})
    with_old = run("sparse_vi", **options, **{old: value})
    assert same(with_new, with_old)
    assert not same(with_new, run("sparse_vi", **BASE))  # the option matters, so the test can fail


@pytest.mark.slow
def test_quasi_newton_num_steps_gives_the_same_weights():
    options = dict(num_chains=2, num_draws=5, max_burn=10, support="uniform")
    with_new = run("quasi_newton", num_iters=2, **options)
    assert same(with_new, run("quasi_newton", num_steps=2, **options))
    assert cj.registry.resolve("quasi_newton").check_options({"num_steps": 2}) != \
        cj.registry.resolve("quasi_newton").check_options({"num_iters": 20})


@pytest.mark.parametrize("method,old,new", [(m, o, n) for m, pairs in ALIASES.items() for o, n in pairs])
def test_old_and_new_name_together_raise_naming_both(method, old, new):
    value = "exact" if new == "kernel" else 2
    with pytest.raises(ValueError, match=f"{old}, {new}"):
        run(method, **{old: value, new: value})


@pytest.mark.parametrize("method", ["sparse_vi", "quasi_newton", "coreset_mcmc"])
@pytest.mark.parametrize("name", ["no_such_option", "average_tail", "average", "draws"])
def test_an_unknown_option_lists_the_new_names(method, name):
    with pytest.raises(ValueError, match=f"{name}: not an option") as err:
        run(method, **{name: 1})
    message = str(err.value)
    listed = message.split("its options are ")[1].split("]")[0]
    assert all(repr(n) in listed for n in SHARED)
    assert not any(repr(old) in listed for old, _ in ALIASES[method])
    for old, new in ALIASES[method]:
        assert f"{old} (for {new})" in message


def test_sparse_vi_takes_any_registered_kernel_or_exact():
    model, y = tiny()
    with pytest.raises(ValueError, match="kernel: unknown value 'gibbs'"):
        cj.coreset(model, y, 2, "sparse_vi", sampler="gibbs", key=jax.random.key(0))
    with pytest.raises(ValueError, match="kernel_settings"):
        cj.coreset(model, y, 2, "sparse_vi", kernel="exact", kernel_settings={"width": 1.0}, key=jax.random.key(0))
    with pytest.raises(ValueError, match="no_such"):
        cj.coreset(model, y, 2, "sparse_vi", kernel="slice", kernel_settings={"no_such": 1}, key=jax.random.key(0))


def test_cli_config_accepts_an_alias_and_refuses_both():
    config = dict(methods=["sparse_vi"], options={"sparse_vi": {"weight_iters": 5}}, sizes=[10])
    assert validate_config(config, ".")["options"]["sparse_vi"] == {"weight_iters": 5}
    config["options"]["sparse_vi"]["num_iters"] = 5
    with pytest.raises(ConfigError, match="weight_iters, num_iters"):
        validate_config(config, ".")
    config["options"]["sparse_vi"] = {"average": 1}
    with pytest.raises(ConfigError, match="also accepted: sampler"):
        validate_config(config, ".")


def test_register_refuses_an_alias_that_names_no_option():
    def make(model, size, num_iters: int = 1):
        return None

    with cj.registry.scoped():
        with pytest.raises(ValueError, match="aliases"):
            cj.register(cj.Construction("toy_aliases", make, needs="posterior", aliases=(("steps", "iters"),)))
        with pytest.raises(ValueError, match="aliases"):
            cj.register(cj.Construction("toy_aliases", make, needs="posterior",
                                        aliases=(("num_iters", "num_iters"),)))
        cj.register(cj.Construction("toy_aliases", make, needs="posterior", aliases=(("steps", "num_iters"),)))
        assert cj.registry.resolve("toy_aliases").check_options({"steps": 3}) == (("num_iters", 3),)
