"""One set of option names across the posterior-driven constructions (issue 23), and the old names they
replace.

Every posterior-driven method names the same things the same way:

- `kernel`: the registered MCMC kernel that samples pi_w (`cj.inference.kernels`; Sparse VI also takes
  "exact", a closed-form `model.posterior`), with `kernel_settings` its settings and `num_warmup` its
  tuning steps;
- `num_iters`: weight-optimisation iterations (Coreset MCMC: the most weight updates; quasi-Newton: the
  most Newton steps; Sparse VI: the weight iterations after each selection);
- `num_draws`: draws per chain, per iteration (quasi-Newton, Sparse VI) or at the end (Coreset MCMC).

`kernel` and `num_iters` were each the majority name already (two of the three methods), and `num_draws`
says what it counts without clashing with `cj.sample`'s arguments. `cj.sample(method=..., num_samples=...)`
keeps its own names: they are arguments of the public sampling function, fixed by the public API, not options
of a construction. No averaging option remains: Coreset MCMC returns the average of the last third of its
iterates, chosen by its stopping rule, and quasi-Newton returns one iterate chosen by a paired comparison.

The old names are documented aliases, renamed by `Construction.check_options` when options are validated,
outside any jit: an alias gives exactly the result of its new name (the same compiled program), and giving
both raises ValueError. They do not warn.
"""

from __future__ import annotations

__all__ = ["ALIASES"]

# method -> ((old name, new name), ...)
ALIASES: dict[str, tuple[tuple[str, str], ...]] = {
    "sparse_vi": (("sampler", "kernel"), ("weight_iters", "num_iters"), ("num_samples", "num_draws")),
    "quasi_newton": (("num_steps", "num_iters"),),
    "coreset_mcmc": (),
}
