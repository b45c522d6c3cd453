#!/usr/bin/env bash
# The runs of one session on a lent GPU machine, each step under its own time limit so that a slow step
# leaves the next ones their time; results and the whole log go to OUT_DIR.
#
#   BENCH_GIT_COMMIT=<commit> bash benchmarks/device_session.sh OUT_DIR
#
# Steps (benchmarks/README.md, "On an accelerator"):
#   1. vs_peers.py, logistic D = 10, N = N_A (default 1e6): our fixed and automatic routes and NumPyro NUTS,
#      each cold in a fresh process (NUTS last, so that a NUTS that does not finish costs only its own slot);
#   2. the same at N = N_B (default 5e6), fixed route and NUTS;
#   3. coreset_mcmc_scale.py: Coreset MCMC's time per iteration at N = 1e4 and 1e7 side by side.
# Wheels the machine lacks (BlackJAX, ArviZ, NumPyro, optax) travel in .whl/ (device README).
set -u
OUT=${1:?usage: device_session.sh OUT_DIR}
mkdir -p "$OUT"
N_A=${N_A:-1000000}
N_B=${N_B:-5000000}
SCALE_NS=${SCALE_NS:-"10000 10000000"}
LIMIT_A=${LIMIT_A:-200}
LIMIT_B=${LIMIT_B:-200}
LIMIT_C=${LIMIT_C:-140}
BUDGET=${BUDGET:-40}  # vs_peers: each contender's process gets max(3 x BUDGET, 120) s
PY=${PY:-python3}
if [ -z "${SKIP_WHEELS:-}" ] && [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1  # vs_peers runs one process per contender
{
    date -u
    nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm --format=csv 2>/dev/null || true
    $PY -c "import jax, numpyro, blackjax, optax; print('jax', jax.__version__, 'numpyro', numpyro.__version__, \
'blackjax', blackjax.__version__, 'optax', optax.__version__, jax.devices())"
    echo "== step 1: vs_peers N=$N_A"
    timeout "$LIMIT_A" $PY benchmarks/vs_peers.py --models logistic10 --sizes "$N_A" \
        --contenders ours_fixed ours_auto nuts --budget "$BUDGET" --warm-max 60 --tag _device_a \
        --v-memory-gib 40 --no-long-reference --out "$OUT"
    echo "== step 1 exit $?"
    echo "== step 2: vs_peers N=$N_B"
    timeout "$LIMIT_B" $PY benchmarks/vs_peers.py --models logistic10 --sizes "$N_B" \
        --contenders ours_fixed nuts --budget "$BUDGET" --warm-max 60 --tag _device_b \
        --v-memory-gib 40 --no-long-reference --out "$OUT"
    echo "== step 2 exit $?"
    echo "== step 3: coreset_mcmc_scale N in $SCALE_NS"
    # shellcheck disable=SC2086
    timeout "$LIMIT_C" $PY benchmarks/coreset_mcmc_scale.py --ns $SCALE_NS --ms 100 --trials 1 --out "$OUT"
    echo "== step 3 exit $?"
    date -u
} 2>&1 | grep -v --line-buffered "^ *warn(\|FutureWarning\|ArviZ is undergoing\|Some upcoming changes\|migration_guide" \
    | tee "$OUT/device_session_log.txt"
