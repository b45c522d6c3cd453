"""A kernel's spec holds its own facts (issue 23): `register_kernel` checks the settings it declares, and
`check_settings` / `initial_step_size` read the spec instead of assuming setting names."""

import jax.numpy as jnp
import pytest

from coresets_jax.inference import kernels
from coresets_jax.inference.kernels import KernelSpec, check_settings, initial_step_size, register_kernel


@pytest.fixture
def toy():
    """Registers under "toy_kernel" and removes it afterwards."""
    yield lambda **kw: register_kernel("toy_kernel", KernelSpec(
        lambda ld, t, s: None, precond="diagonal", gradient_evals=lambda info: jnp.asarray(0), **kw))
    kernels.KERNELS.pop("toy_kernel", None)


def test_register_kernel_checks_the_declared_settings(toy):
    with pytest.raises(ValueError, match="target_accept"):
        toy(defaults={"target_accept": 1.5, "initial_step_size": 1.0})
    with pytest.raises(ValueError, match="scale_setting"):
        toy(defaults={"target_accept": 0.5})  # the default scale setting is not declared
    with pytest.raises(ValueError, match="scale"):
        toy(defaults={"target_accept": 0.5, "scale": -1.0}, scale_setting="scale")
    with pytest.raises(ValueError, match="spec.check: reads the setting 'passes'"):
        toy(defaults={"target_accept": 0.5, "initial_step_size": 1.0}, check=lambda s: s["passes"])
    assert "toy_kernel" not in kernels.KERNELS
    toy(defaults={"depth": 2}, adapts_step_size=False, scale_setting=None)  # no scale, nothing to adapt
    assert check_settings("toy_kernel", {"depth": 3}) == {"depth": 3}
    assert initial_step_size("toy_kernel", {"depth": 3}, 4) == 1.0


def test_the_scale_setting_is_the_one_the_spec_names(toy):
    toy(defaults={"target_accept": 0.5, "scale": 2.0, "width": 7.0}, scale_setting="scale")
    settings = check_settings("toy_kernel", {})
    assert initial_step_size("toy_kernel", settings, 4) == 2.0  # not `width`, not `initial_step_size`
    with pytest.raises(ValueError, match="scale: expected a positive number"):
        check_settings("toy_kernel", {"scale": 0.0})
    with pytest.raises(ValueError, match="target_accept"):
        check_settings("toy_kernel", {"target_accept": 1.0})


def test_built_in_kernels_declare_their_scale():
    assert {name: spec.scale_setting for name, spec in kernels.KERNELS.items()
            if name in ("nuts", "hmc", "mala", "rwmh", "slice")} == {
        "nuts": "initial_step_size", "hmc": "initial_step_size", "mala": "initial_step_size",
        "rwmh": "initial_step_size", "slice": "width"}
    assert initial_step_size("slice", check_settings("slice", {"width": 2.5}), 3) == 2.5
    assert initial_step_size("mala", check_settings("mala", {}), 64) == pytest.approx(1.65 * 64 ** (-1 / 6))
    with pytest.raises(ValueError, match="width"):
        check_settings("slice", {"width": -1.0})
