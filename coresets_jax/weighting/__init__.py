"""Stage 1, the weighting distribution pi_hat (HC §5): where the random projection draws its theta from.

- `pihat`: the Laplace approximation (the default of HC's experiments; `laplace`, and its pure core
  `laplace_fn`), the prior, and samples from elsewhere (`samples`); each has `sample(key, num) -> (num, D)`.
- `laplace_mode`: the Laplace fit's mode finders, damped Newton with the exact Hessian or optax's L-BFGS.
"""

from .pihat import GaussianApproximation, PriorSamples, Samples, laplace, laplace_fn, prior, samples

__all__ = ["GaussianApproximation", "PriorSamples", "Samples", "laplace", "laplace_fn", "prior", "samples"]
