"""Bradley–Terry: ranking 20 players from 10,000 games

Paired comparisons (the model of the Hot DoG experiments): player i has a strength theta_i, and the first
player of a game wins with probability sigmoid(theta_a - theta_b). D = 20 parameters, N = 10,000 games.
A fixed budget of M = 200 games, chosen by OMP and checked by the certificate; the strengths estimated from
the coreset are compared with the truth. (The likelihood sees only differences of strengths; the prior
pins their mean, so the chains move slowly along that direction and R-hat can exceed 1.01, which the
certificate reports.)
"""

import jax
import matplotlib.pyplot as plt
import numpy as np

import coresets_jax as cj

key = jax.random.key(3)
games = cj.data.synthetic_bradley_terry(key, 10_000, num_players=20)
data = games.train                                   # (pairs (N, 2), y (N,)): y = 1 if the first player won
model = cj.models.bradley_terry(num_players=20)

cs = cj.coreset(model, data, size=200, method="omp", key=key)
post = cj.sample(model, data, key, weights=cs, num_samples=1000, num_warmup=1000)
cert = cj.certify(model, data, cs, post.samples)
print(cs)
print(f"certificate: KL {cert.kl:.2g} ± {cert.kl_se:.1g} nats, k-hat {cert.khat:.2f}")

truth = np.asarray(games.theta_true)
mean, sd = np.asarray(post.mean), np.asarray(post.flat_samples).std(0)
print(f"correlation of the estimated and true strengths: {np.corrcoef(mean, truth)[0, 1]:.2f}")

fig, ax = plt.subplots(figsize=(4.6, 4.2))
ax.errorbar(truth, mean, yerr=2 * sd, fmt="o", ms=3, lw=1)
lim = [truth.min() - 0.3, truth.max() + 0.3]
ax.plot(lim, lim, color="grey", ls=":")
ax.set(xlabel="true strength", ylabel="posterior mean ± 2 sd (coreset)", title=f"{cs.num_points} of 10,000 games")
