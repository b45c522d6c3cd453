#!/usr/bin/env bash
# One lent GPU call after the CPU route's cold-path work (benchmarks/README.md, "A fourth lease"):
#   A. the peers at N = 5e5 and 1e6 (our fixed route, NumPyro NUTS and HMCECS), every contender with full
#      float32 products, each cold in a fresh process: does the CPU work (programs compiled ahead, in the
#      background, a smaller OMP program) carry over to a GPU, where the route was compile-bound?
#   B. the same fixed route on the machine's host CPU alone (JAX_PLATFORMS=cpu, 16 cores), at the same sizes:
#      is the host a better place than the GPU for a construction from a cold start?
#   C. Coreset MCMC's time per iteration at N = 1e4 and 1e6, now that its unit row weights sit behind an
#      optimisation barrier (its compile spent 4-7 s constant-folding them on the GPU before);
#   D. 100 batched trials of Frank-Wolfe, GIGA and OMP against a loop (device.py's batched part);
#   T. the fast test set on the host CPU (JAX_PLATFORMS=cpu) under the image's JAX, a newer one than here.
#
#   BENCH_GIT_COMMIT=<commit> [STEPS="A B C D T"] [CONTENDERS_A="ours_fixed nuts hmcecs"] \
#       bash benchmarks/device_session4.sh OUT_DIR
#
# Each step runs under its own time limit and leaves its files in OUT_DIR/results.tgz, so a step stopped at its
# limit keeps what the earlier ones wrote. Wheels the machine lacks travel in .whl/ (benchmarks/README.md).
set -u
OUT=${1:?usage: device_session4.sh OUT_DIR}
RES=${RES:-/tmp/device_results}
mkdir -p "$OUT" "$RES"
PY=${PY:-python3}
if [ -z "${SKIP_WHEELS:-}" ] && [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
STEPS=" ${STEPS:-A B C D T} "
pack() { tar -czf "$OUT/results.tgz" -C "$RES" . 2>/dev/null; }
step() { case "$STEPS" in *" $1 "*) return 0;; *) return 1;; esac; }
{
    date -u
    nvidia-smi --query-gpu=name,memory.total --format=csv 2>/dev/null || true
    $PY -c "import jax, numpyro, blackjax, coresets_jax; print(jax.__version__, numpyro.__version__, \
blackjax.__version__, jax.devices(), 'host cores', __import__('os').cpu_count())" || exit 1
    step A && {
    echo "== A: vs_peers at 5e5 and 1e6 on the GPU, full float32 products for every contender"
    JAX_DEFAULT_MATMUL_PRECISION=float32 timeout "${LIMIT_A:-250}" $PY benchmarks/vs_peers.py --models logistic10 \
        --sizes 500000 1000000 --contenders ${CONTENDERS_A:-ours_fixed nuts hmcecs} --budget 90 --warm-max 40 \
        --tag _gpu_session4 --v-memory-gib 60 --no-long-reference --out "$RES"
    echo "== A exit $?"; pack; }
    step B && {
    echo "== B: our fixed route on the host CPU alone"
    JAX_PLATFORMS=cpu BENCH_MACHINE_NOTE="the host CPU alone (JAX_PLATFORMS=cpu, $(nproc) cores) of a machine with \
one $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1), used by this run alone" \
        timeout "${LIMIT_B:-70}" $PY benchmarks/vs_peers.py --models logistic10 \
        --sizes 500000 1000000 --contenders ours_fixed --budget 30 --warm-max 40 --tag _gpu_host_cpu \
        --v-memory-gib 60 --no-long-reference --out "$RES"
    echo "== B exit $?"; pack; }
    step C && {
    echo "== C: Coreset MCMC per iteration at 1e4 and 1e6"
    timeout "${LIMIT_C:-60}" $PY benchmarks/coreset_mcmc_scale.py --ns 10000 1000000 --ms 100 --trials 1 --out "$RES"
    echo "== C exit $?"; pack; }
    step D && {
    echo "== D: batched trials"
    timeout "${LIMIT_D:-60}" $PY benchmarks/device.py --skip pipeline,full_nuts,coreset_mcmc --tag _session4 \
        --out "$RES"
    echo "== D exit $?"; pack; }
    step T && {
    echo "== T: the fast test set on the host CPU"
    JAX_PLATFORMS=cpu timeout "${LIMIT_T:-150}" $PY -m pytest -q -n "${WORKERS_T:-14}" -m "not slow" tests \
        -p no:cacheprovider > "$RES/pytest_fast_host_cpu.txt" 2>&1
    echo "== T exit $?"; tail -n 40 "$RES/pytest_fast_host_cpu.txt"; pack; }
    date -u
} 2>&1 | grep -v --line-buffered \
    "^ *warn(\|FutureWarning\|ArviZ is undergoing\|Some upcoming changes\|migration_guide\|cuda_timer" \
    | tee "$OUT/device_session4_log.txt"
pack
