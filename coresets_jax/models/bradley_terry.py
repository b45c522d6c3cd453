"""The Bradley–Terry model of paired comparisons (Bradley & Terry 1952), as in the Hot DoG experiments
(`papers/hot-dog.md` §4.1).

The data is `(pairs, y)`: `pairs` of shape (N, 2) holds the players (a_n, b_n) of game n, and y_n says
whether a_n won (1 or +1; 0 or -1 if b_n won). Player i has a strength theta_i, and

    P(a beats b | theta) = sigmoid((theta_a - theta_b) / scale),

so L_n(theta) = log sigmoid(s_n (theta_{a_n} - theta_{b_n}) / scale) with s_n = +1 if a_n won and -1 if not.
The prior is theta ~ N(0, prior_scale^2 I), which also fixes the common shift that the likelihood cannot see.
D is the number of players. Hot DoG's data use Elo's scale = 400; the default here is 1 (strengths in
log-odds units).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..core.model import Model
from ..core.validate import check_int
from .glm import gaussian_log_prior

__all__ = ["bradley_terry", "check_games"]


def check_games(data, num_players: int, model_name: str = "bradley_terry", name: str = "data") -> None:
    """ValueError unless `data` is `(pairs, y)`: integer pairs of shape (N, 2) in [0, num_players) with
    a != b, and outcomes y of shape (N,) in {0, 1} or {-1, +1}."""
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise ValueError(f"{name}: {model_name} expects the tuple (pairs, y): pairs of shape (N, 2) with the "
                         f"two players of each game, y of shape (N,) (1 if the first won), got "
                         f"{type(data).__name__}")
    pairs, y = np.asarray(data[0]), np.asarray(data[1])
    if pairs.ndim != 2 or pairs.shape[1] != 2:
        raise ValueError(f"{name}: pairs must have shape (N, 2), got {pairs.shape}")
    if y.shape != (pairs.shape[0],):
        raise ValueError(f"{name}: y must have shape (N,) = ({pairs.shape[0]},), got {y.shape}")
    if not np.issubdtype(pairs.dtype, np.integer):
        raise ValueError(f"{name}: pairs must hold integer player indices, got dtype {pairs.dtype}")
    if pairs.size and (pairs.min() < 0 or pairs.max() >= num_players):
        raise ValueError(f"{name}: players must lie in [0, num_players = {num_players}), got "
                         f"[{pairs.min()}, {pairs.max()}]")
    same = int(np.sum(pairs[:, 0] == pairs[:, 1]))
    if same:
        raise ValueError(f"{name}: a player cannot meet itself ({same} rows have a == b)")
    if not (np.all((y == 0) | (y == 1)) or np.all(np.abs(y) == 1)):
        raise ValueError(f"{name}: {model_name} needs outcomes y in {{0, 1}} or {{-1, +1}} (1: the first "
                         f"player won), got values {np.unique(y)[:6].tolist()}")


def bradley_terry(num_players: int, prior_scale: float = 1.0, scale: float = 1.0) -> Model:
    """L_n(theta) = log sigmoid(s_n (theta_{a_n} - theta_{b_n}) / scale); pi_0 = N(0, prior_scale^2 I)."""
    num_players = check_int(num_players, "num_players", 2)
    for label, value in (("prior_scale", prior_scale), ("scale", scale)):
        if not value > 0:
            raise ValueError(f"{label}: must be positive, got {value!r}")
    num_players = int(num_players)

    def margin(theta, datum):
        (a, b), y = datum
        sign = jnp.where(y > 0, 1.0, -1.0).astype(theta.dtype)  # {0, 1} and {-1, +1} alike
        return sign * (theta[a] - theta[b]) / scale, sign

    def log_likelihood(theta, datum):
        z, _ = margin(theta, datum)
        return -jax.nn.softplus(-z)

    def grad_log_likelihood(theta, datum):
        (a, b), _ = datum
        z, sign = margin(theta, datum)
        slope = sign * jax.nn.sigmoid(-z) / scale
        return jnp.zeros_like(theta).at[a].add(slope).at[b].add(-slope)

    def sample_prior(key, num, data=None):
        return prior_scale * jax.random.normal(key, (num, num_players))

    return Model(log_likelihood=log_likelihood, log_prior=gaussian_log_prior(prior_scale),
                 grad_log_likelihood=grad_log_likelihood, sample_prior=sample_prior, name="bradley_terry",
                 dim=num_players,
                 data_spec=lambda data, model_name, name: check_games(data, num_players, model_name, name))
