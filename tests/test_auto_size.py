"""`cj.coreset(..., tol=...)`: the smallest coreset whose certificate says KL(pi_w || pi) <= tol.

Judged on linear regression with known noise, whose coreset posteriors are closed form, so the exact KL of
every coreset is known: what the search returns must reach the tolerance by the exact KL (within the 3x the issue
allows for the certificate's estimate), the size tried before it must not have passed, and a search that
cannot reach the tolerance must warn and never call its answer "good". Sizes that cannot fit in memory are
refused before any work.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import coresets_jax as cj
from coresets_jax.construct import auto_size, memory


def gaussian(d=5, n=2000):
    y = cj.data.synthetic_gaussian(jax.random.key(0), n, dim=d, mean=jnp.ones(d))
    return cj.models.gaussian_mean(d), y


def regression(n=5000, d=8):
    """Linear regression with known noise (a closed-form posterior, so the exact KL of any coreset is known)
    on heavy-tailed covariates: a coreset must match sum w x x^T and sum w x y, D(D + 3)/2 moments, so the
    KL falls gradually with M (GIGA: 0.15 nats at M = 16, 0.03 at 32, 0.008 at 64)."""
    rng = np.random.default_rng(0)
    X = rng.standard_t(3, (n, d))
    X[:, 0] = 1.0
    y = X @ rng.standard_normal(d) + rng.standard_normal(n)
    data = (jnp.asarray(X, jnp.float32), jnp.asarray(y, jnp.float32))
    model = cj.models.linear_regression()
    mean, cov = model.posterior(data)

    def kl(cs):
        return float(cj.metrics.gaussian_kl(*model.posterior(data, cs.dense(n)), mean, cov))

    return model, data, kl


@pytest.mark.slow
def test_auto_size_reaches_tol_by_the_exact_kl_and_the_size_before_did_not():
    model, data, kl = regression()
    tol = 0.1
    traced = cj.inference.trace_count()
    cs = cj.coreset(model, data, key=jax.random.key(1), tol=tol, method="giga")
    path = cs.info["path"]
    sizes = [p["size"] for p in path]
    # one compiled sampler per shared capacity (sizes up to 4 M_0 draw on 64 slots), not one per size
    shared = {auto_size._shared_capacity(s, sizes[0]) for s in sizes}
    assert cj.inference.trace_count() - traced == len(shared) < len(sizes), (sizes, shared)
    # geometric from the power of two at or above max(16, D + 1), then one size between the last two
    assert sizes[0] == 16 and all(b == 2 * a for a, b in zip(sizes, sizes[1:]) if b > a)
    assert len(sizes) >= 2, path  # GIGA's 16 points are above the tolerance: a real search
    chosen = next(p for p in path if p["size"] == cs.capacity)
    assert chosen["passed"] and cs.certificate.verdict in ("good", "usable")
    assert cs.certificate.kl + 2 * cs.certificate.kl_se <= tol
    assert kl(cs) <= 3 * tol, kl(cs)
    smaller = [p for p in path if p["size"] < cs.capacity]
    assert smaller and not any(p["passed"] for p in smaller)  # the smallest size tried that passed
    assert all(kl(cj.coreset(model, data, p["size"], "giga", key=jax.random.key(1))) > 0.5 * tol for p in smaller)
    assert all(set(p) >= {"size", "points", "kl", "kl_se", "khat", "verdict", "seconds"} for p in path)
    assert cs.settings["size"] == "auto" and cs.settings["tol"] == tol


@pytest.mark.slow
def test_unreachable_tol_warns_and_is_never_good():
    model, data, _ = regression()
    with pytest.warns(RuntimeWarning, match="no size up to 32 reached KL <= 1e-05"):
        cs = cj.coreset(model, data, 32, "giga", key=jax.random.key(2), tol=1e-5)
    assert cs.certificate.verdict != "good"
    assert all(not p["passed"] for p in cs.info["path"])
    best = min(cs.info["path"], key=lambda p: p["kl"])
    assert cs.capacity == best["size"]


def test_tol_arguments_are_checked():
    model, y = gaussian(d=2, n=100)
    with pytest.raises(ValueError, match="tol"):
        cj.coreset(model, y, key=jax.random.key(0), tol=0.0)
    with pytest.raises(ValueError, match="posterior-driven"):
        cj.coreset(model, y, key=jax.random.key(0), tol=0.1, method="coreset_mcmc")
    with pytest.raises(ValueError, match="size: required"):
        cj.coreset(model, y, key=jax.random.key(0))
    with pytest.raises(ValueError, match="size: must be at most N"):
        cj.coreset(model, y, 500, key=jax.random.key(0), tol=0.1)


def test_a_size_that_cannot_fit_is_refused_before_any_work(monkeypatch):
    model, y = gaussian(d=2, n=3000)
    # OMP keeps QR factors of its support (M x M triangles): its state grows like M^2.
    omp = cj.methods()["omp"]
    small, large = (memory.state_bytes(omp, m, (3000, 500), jnp.float32) for m in (100, 2000))
    assert large > 100 * small
    monkeypatch.setattr(memory, "available_bytes", lambda device=None: 2.0 * large)  # fits 2 states, not 3 + V
    monkeypatch.setattr(cj.features.projection, "features", lambda *a, **k: pytest.fail("projected before the check"))
    with pytest.raises(ValueError, match=r"size: omp at size 2000 needs about .* GiB .* available"):
        cj.coreset(model, y, 2000, "omp", key=jax.random.key(0))
    with pytest.raises(ValueError, match="size: omp at size 2000"):
        cj.build(jnp.ones((3000, 500)), 2000, "omp")
    # With tol and no size, the default limit shrinks to what fits instead.
    assert auto_size.default_limit(3000) == 3000


@pytest.mark.slow
def test_streamed_auto_size_reaches_tol_by_the_exact_kl():
    # A stream of 4 chunks: one pass builds the size-64 coreset, then each size tried is certified with a pass
    # over the chunks (a list: readable again); a one-shot generator is refused.
    model, data, kl = regression(n=4000, d=6)
    chunks = [jax.tree_util.tree_map(lambda a: a[i:i + 1000], data) for i in range(0, 4000, 1000)]
    thetas = cj.laplace(model, chunks[0]).sample(jax.random.key(1), 200)
    cs = cj.stream_coreset(model, chunks, 64, thetas, jax.random.key(2), method="giga", tol=0.1)
    assert cs.certificate.verdict in ("good", "usable") and cs.certificate.kl + 2 * cs.certificate.kl_se <= 0.1
    assert kl(cs) <= 0.3, kl(cs)
    assert [p["passed"] for p in cs.info["path"] if p["size"] < cs.capacity] == \
        [False] * sum(p["size"] < cs.capacity for p in cs.info["path"])
    assert int(cs.info["num_rows"]) == 4000 and np.all(np.asarray(cs.indices)[np.asarray(cs.weights) > 0] < 4000)
    with pytest.raises(ValueError, match="readable again"):
        cj.stream_coreset(model, iter(chunks), 64, thetas, jax.random.key(2), method="giga", tol=0.1)


def test_padding_a_coreset_leaves_its_certificate_unchanged():
    # The size search draws and certifies each size on slots padded to a shared capacity; padding (row 0,
    # weight 0) must add exactly nothing to the coreset's log density, so the certificate is the same.
    model, y = gaussian()
    cs = cj.coreset(model, y, 16, "giga", key=jax.random.key(0))
    draws = cj.sample(model, y, jax.random.key(1), weights=cs, num_samples=300, num_warmup=200, warn=False).samples
    wide = auto_size.padded(cs, 64)
    assert wide.capacity == 64 and wide.num_points == cs.num_points
    assert np.all(np.asarray(wide.weights)[16:] == 0) and np.all(np.asarray(wide.indices)[16:] == 0)
    plain, padded = cj.certify(model, y, cs, draws), cj.certify(model, y, wide, draws)
    np.testing.assert_allclose([padded.kl, padded.khat], [plain.kl, plain.khat], rtol=1e-5, atol=1e-9)
    assert padded.verdict == plain.verdict


def test_planned_sizes_are_the_doublings_and_their_geometric_means():
    assert auto_size.planned_sizes(16, 4096) == (64, (16, 23, 32, 45))
    assert auto_size.planned_sizes(16, 40) == (40, (16, 23, 32, 36))
    assert auto_size.planned_sizes(32, 32) == (32, ())


@pytest.mark.slow
def test_omp_search_runs_omp_once_for_the_sizes_on_its_greedy_path(monkeypatch):
    """With OMP the sizes up to 4 M_0 come from one run (one compilation), and the chosen coreset is the one
    cj.coreset builds at that size with the same key (the same exact KL)."""
    model, data, kl = regression()
    from coresets_jax.construct import pipeline
    sizes_built = []
    build_checked = pipeline.build_checked

    def counting(V, stats, size, *args, **kwargs):
        sizes_built.append(size)
        return build_checked(V, stats, size, *args, **kwargs)

    monkeypatch.setattr(pipeline, "build_checked", counting)
    cs = cj.coreset(model, data, key=jax.random.key(1), tol=0.1)
    tried = [p["size"] for p in cs.info["path"]]
    capacity, planned = auto_size.planned_sizes(tried[0], auto_size.default_limit(5000))
    assert len(tried) >= 2 and all(s <= capacity for s in tried), tried  # a real search, all on the path
    assert sizes_built == [capacity]
    assert cs.settings["greedy_path_of"] == capacity and "path_sizes" not in cs.settings["options"]
    alone = cj.coreset(model, data, cs.capacity, "omp", key=jax.random.key(1))
    np.testing.assert_allclose(kl(cs), kl(alone), rtol=1e-3, atol=1e-6)


@pytest.mark.slow
def test_a_search_whose_coreset_stopped_growing_switches_strategy_and_says_what_it_tried():
    # With J = 16 features OMP fits the projection exactly with at most 16 points, so every size above that
    # builds the same coreset: the search must stop after two such sizes (not climb to the limit, as it did
    # for D = 50 at J = 500, 442 s), then switch: 4 J features, then trained weights, each in the path.
    key = jax.random.key(0)
    ds = cj.data.synthetic_logistic(key, 2000, theta=(1.0, -0.5, 0.8, 0.3, -1.2))
    with pytest.warns(RuntimeWarning, match=r"stopped growing at 16 points .*64 features"):
        cs = cj.coreset(cj.models.logistic_regression(), ds.train, size=1024, key=key, tol=1e-6, num_features=16)
    path = cs.info["path"]
    assert [p["size"] for p in path[:3]] == [16, 32, 64] and "strategy" not in path[2]
    assert path[1]["points"] == path[2]["points"] == 16 and cs.info["saturated_at"] == 16
    assert any(p.get("strategy") == "64 features" for p in path[3:])
    assert path[-1]["strategy"].startswith("refine")
    assert cs.certificate.verdict != "good" and not any(p["passed"] for p in path)


def test_the_saturation_rule_needs_two_failing_sizes_with_the_same_points_below_the_smaller_size():
    stopped = auto_size._stopped_growing
    assert stopped({"size": 32, "points": 16}, {"size": 64, "points": 16})
    assert not stopped({"size": 16, "points": 16}, {"size": 32, "points": 16})  # 16 filled its slots
    assert not stopped({"size": 32, "points": 20}, {"size": 64, "points": 24})  # still growing


def _student_t_regression(n=5000, d=6):
    """A robust (Student-t) regression as a NumPyro model, parameters (b, log nu, log scale): a coreset of a
    few points whose fit leaves some rows at residual ~0 has a spike at scale -> 0 (their weighted density
    grows like w / scale), which the full posterior does not have."""
    import numpyro
    import numpyro.distributions as dist

    rng = np.random.default_rng(5)
    X = rng.standard_normal((n, d)).astype(np.float32)
    y = (X @ (0.5 * rng.standard_normal(d)) + 0.7 * rng.standard_t(4, n)).astype(np.float32)

    def robust(X, y=None):
        b = numpyro.sample("b", dist.Normal(jnp.zeros(X.shape[1]), 2.0).to_event(1))
        s = numpyro.sample("s", dist.HalfNormal(2.0))
        nu = numpyro.sample("nu", dist.Gamma(2.0, 0.1))
        with numpyro.plate("N", X.shape[0]):
            numpyro.sample("obs", dist.StudentT(nu, X @ b, s), obs=y)

    return cj.from_numpyro(robust, X, y)


@pytest.mark.slow
def test_chains_of_an_unreliable_size_do_not_start_the_next_one():
    # The 16-point coreset's chains sit in its scale -> 0 spike (certificate `unreliable`). Started from its
    # draws, the 32- and 64-point chains stayed in their own copies of the spike: the search certified every
    # size `unreliable` (KL 58 and 28) and returned one, while fresh chains on the same coresets give KL ~1e-3.
    pytest.importorskip("numpyro")
    import warnings

    model, data = _student_t_regression()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cs = cj.coreset(model, data, key=jax.random.key(0), tol=0.1, size=64)
    path = cs.info["path"]
    assert path[0]["size"] == 16 and path[0]["verdict"] in ("unreliable", "poor"), path  # the spike
    assert auto_size.passes(cs.certificate, 0.1), path
    fresh = cj.sample(model, data, jax.random.key(3), weights=cs, num_samples=500, num_warmup=500, warn=False)
    again = cj.certify(model, data, cs, fresh.samples)
    assert auto_size.passes(again, 0.1), (again.kl, again.verdict)
    # the search's own draws and the fresh ones sample one posterior: means within 0.5 sd
    a, b = (np.asarray(s).reshape(-1, np.shape(s)[-1]) for s in (cs.info["samples"], fresh.samples))
    assert np.max(np.abs(a.mean(0) - b.mean(0)) / b.std(0)) < 0.5


def test_the_next_size_starts_from_draws_only_a_trusted_certificate_vouched_for():
    # The search's draw/judge hooks, faked: size 16 `unreliable`, 32 `usable` but above tol, 64 `good`. The
    # 32-point chains must start from their own fit (init None), the 64-point ones at the 32-point draws.
    import dataclasses

    @dataclasses.dataclass
    class FakeCertificate:
        verdict: str
        kl: float
        kl_se: float = 0.0
        khat: float = 0.0

    verdicts = {16: ("unreliable", 50.0), 32: ("usable", 0.5), 64: ("good", 0.01), 45: ("usable", 0.3)}
    inits = {}

    def build_at(size):
        return cj.Coreset(jnp.arange(size), jnp.ones(size))

    def draw(cs, key, init):
        size = cs.num_points
        inits[size] = None if init is None else np.asarray(init)
        return type("Draws", (), {"samples": jnp.full((2, 5, 3), float(size))})()

    def judge(cs, draws):
        return FakeCertificate(*verdicts[cs.num_points])

    model = cj.models.gaussian_mean(3)
    cs = auto_size.auto_coreset(model, jnp.zeros((1000, 3)), 1000, 0.1, 64, cj.registry.resolve("omp"),
                                jax.random.key(0), build_at, draw=draw, judge=judge, dim=3)
    assert [p["size"] for p in cs.info["path"]] == [16, 32, 64, 45]
    assert inits[16] is None and inits[32] is None  # 16's draws were not trusted
    np.testing.assert_array_equal(inits[64], np.full((2, 3), 32.0))  # 32's were (usable)
    np.testing.assert_array_equal(inits[45], np.full((2, 3), 64.0))
    assert cs.capacity == 64


def test_with_no_size_passing_the_fewest_points_within_the_noise_of_the_lowest_kl_are_returned():
    # Faked certificates, nothing passes tol = 0.1 up to the limit 64: 32 (KL 1.60 +- 0.05) is within two
    # standard errors of 64's 1.55 +- 0.05, with half the points, so it is returned; at 2.0 it is not.
    import dataclasses

    @dataclasses.dataclass
    class FakeCertificate:
        verdict: str
        kl: float
        kl_se: float
        khat: float = 0.0

    def run(kls):
        def judge(cs, draws):
            got = kls[cs.num_points]
            return FakeCertificate(*got) if isinstance(got[0], str) else FakeCertificate("poor", *got)

        def draw(cs, key, init):
            return type("Draws", (), {"samples": jnp.zeros((2, 5, 3))})()

        with pytest.warns(RuntimeWarning, match="no size up to 64"):
            return auto_size.auto_coreset(cj.models.gaussian_mean(3), jnp.zeros((1000, 3)), 1000, 0.1, 64,
                                          cj.registry.resolve("omp"), jax.random.key(0),
                                          lambda size: cj.Coreset(jnp.arange(size), jnp.ones(size)),
                                          draw=draw, judge=judge, dim=3)

    assert run({16: (5.0, 0.1), 32: (1.60, 0.05), 64: (1.55, 0.05)}).capacity == 32
    assert run({16: (5.0, 0.1), 32: (2.00, 0.05), 64: (1.55, 0.05)}).capacity == 64
    assert run({16: (1.56, 0.05), 32: (1.60, 0.05), 64: (1.55, 0.05)}).capacity == 16
    # an unreliable estimate, however low, is not trusted while some size has a trustworthy one
    assert run({16: ("unreliable", 0.9, 0.05), 32: (1.60, 0.05), 64: (1.55, 0.05)}).capacity == 32


class _Cert:
    """A faked certificate: what the search reads (verdict, KL and its se, k-hat, how it was computed)."""

    def __init__(self, kl, verdict="usable", precision="float64", log_ratio=None, kl_se=0.0):
        self.kl, self.verdict, self.precision, self.kl_se, self.khat = kl, verdict, precision, kl_se, 0.0
        self.log_ratio = np.zeros(10) if log_ratio is None else log_ratio


def _screened_search(exact_kls, screen_kls, noise=1e-4, spread=False):
    """auto_coreset with faked draws, full-pass certificates and screens; returns (coreset, judged sizes)."""
    judged = []

    def judge(cs, draws):
        judged.append(cs.num_points)
        return _Cert(exact_kls[cs.num_points])

    def screen(cs, draws, seed):
        r = np.linspace(0.0, 5.0, 10) if spread else None
        return _Cert(screen_kls[cs.num_points], precision="screened", log_ratio=r), noise

    def draw(cs, key, init):
        return type("Draws", (), {"samples": jnp.zeros((2, 5, 3))})()

    cs = auto_size.auto_coreset(cj.models.gaussian_mean(3), jnp.zeros((1000, 3)), 1000, 0.1, 64,
                                cj.registry.resolve("omp"), jax.random.key(0),
                                lambda size: cj.Coreset(jnp.arange(size), jnp.ones(size)),
                                draw=draw, judge=judge, dim=3, screen=screen)
    return cs, judged


def test_screens_decide_the_sizes_tried_and_only_the_size_returned_gets_the_full_pass():
    kls = {16: 5.0, 23: 0.4, 32: 0.05, 45: 0.02, 64: 0.01}
    cs, judged = _screened_search(kls, kls)
    assert cs.capacity == 32 and judged == [32]
    assert cs.certificate.precision == "float64"  # the returned certificate is the full pass's
    path = {p["size"]: p for p in cs.info["path"]}
    assert [p["size"] for p in cs.info["path"]] == [16, 32, 23]
    assert path[16]["screened"] and path[23]["screened"] and not path[32]["screened"]
    assert path[32]["screened_kl"] == 0.05 and path[32]["passed"]


def test_a_screened_pass_that_the_full_pass_reverses_searches_again_on_full_passes():
    # the screen says 32 passes (0.05); the full pass says 0.5: the search runs again on full passes alone
    exact = {16: 5.0, 23: 2.0, 32: 0.5, 45: 0.3, 64: 0.01}
    screened = {16: 5.0, 23: 2.0, 32: 0.05, 45: 0.3, 64: 0.01}
    cs, judged = _screened_search(exact, screened)
    assert cs.capacity == 64 and cs.certificate.kl == 0.01 and cs.certificate.precision == "float64"
    assert judged == [32, 16, 64, 45]  # 32's full certificate is reused in the second search
    second = cs.info["path"][3:]
    assert [p["size"] for p in second] == [16, 32, 64, 45] and not any(p["screened"] for p in second)


def test_a_screen_whose_error_could_change_the_decision_gives_way_to_the_full_pass():
    # r spread over 5 nats and an error sd of 1 nat: a bound that could move any of these KLs across tol
    kls = {16: 0.5, 23: 0.2, 32: 0.05, 45: 0.02, 64: 0.01}
    cs, judged = _screened_search(kls, kls, noise=1.0, spread=True)
    assert cs.capacity == 32 and judged == [16, 32, 23]
    assert not any(p["screened"] for p in cs.info["path"])
    # a failure far beyond that bound is decided by the screen (16 at 50 nats)
    kls[16] = 50.0
    cs, judged = _screened_search(kls, kls, noise=1.0, spread=True)
    assert judged == [32, 23] and cs.info["path"][0]["screened"]


def test_with_no_size_passing_the_one_returned_gets_the_full_pass():
    kls = {16: 5.0, 32: 2.0, 64: 1.0}
    with pytest.warns(RuntimeWarning, match="no size up to 64"):
        cs, judged = _screened_search(kls, kls)
    assert cs.capacity == 64 and judged == [64] and cs.certificate.precision == "float64"


@pytest.mark.slow
def test_a_screened_search_returns_what_the_full_pass_search_returns(monkeypatch):
    # N = 2^17 logistic rows, D = 10 (sizes 16, 32, 64, 45): the screen decides the sizes tried (checked
    # against the full pass at each), and the coreset returned, its certificate and the path's sizes are those
    # of the search without it.
    from coresets_jax.certification import screen

    ds = cj.data.synthetic_logistic(jax.random.key(0), screen.SCREEN_MIN_ROWS, theta=(1.0,) * 9 + (0.0,))
    model, data = cj.models.logistic_regression(), (ds.X, ds.y)
    runs = {}
    for on in (True, False):
        monkeypatch.setattr(screen, "ENABLED", on)
        runs[on] = cj.coreset(model, data, key=jax.random.key(1), tol=0.1)
    screened, full = runs[True], runs[False]
    assert [p["size"] for p in screened.info["path"]] == [p["size"] for p in full.info["path"]]
    np.testing.assert_array_equal(screened.indices, full.indices)
    assert screened.certificate.kl == full.certificate.kl and screened.certificate.precision != "screened"
    on_screen = [p for p in screened.info["path"] if p["screened"]]
    assert len(on_screen) >= 2
    exact = {p["size"]: p for p in full.info["path"]}
    for p in on_screen:
        assert abs(p["kl"] - exact[p["size"]]["kl"]) <= 0.01 * exact[p["size"]]["kl"] + 1e-3, (p, exact[p["size"]])
