#!/usr/bin/env bash
# Three GPU questions in one call (docs/performance.md, "Why NumPyro's NUTS ran so long on the GPU"); it ran on an
# H200 and answered them (benchmarks/README.md, "A third lease"):
#   A. is TensorFloat-32 what makes NumPyro's NUTS trees reach their maximum depth at N = 1e6? Two cold seeds
#      that ran past 100 s with JAX's default (TF32) products, again with full float32 products;
#   B. the peers comparison at N = 1e6 with full float32 products for every contender (NumPyro's NUTS then
#      gives a reference for max |z|, if it finishes), our route now running in full float32 in any case;
#   C. our fixed route at N = 5e6, whose certificate KL was 0.027 with TF32 products.
#
#   BENCH_GIT_COMMIT=<commit> bash benchmarks/device_session3.sh OUT_DIR
#
# Wheels the machine lacks (BlackJAX, ArviZ, NumPyro, optax) travel in .whl/ (benchmarks/README.md).
set -u
OUT=${1:?usage: device_session3.sh OUT_DIR}
mkdir -p "$OUT"
PY=${PY:-python3}
if [ -z "${SKIP_WHEELS:-}" ] && [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
{
    date -u
    nvidia-smi --query-gpu=name,memory.total --format=csv 2>/dev/null || true
    echo "== A: NumPyro NUTS at N = 1e6, seeds 0 and 2, full float32 products"
    timeout "${LIMIT_A:-200}" $PY benchmarks/investigations/gpu_stages.py --out "$OUT" --parts seeds \
        --ns "${N_A:-1000000}" --seeds 0 2 --limit 90 --matmul-precision float32
    echo "== A exit $?"
    echo "== B: vs_peers N = 1e6, every contender with full float32 products"
    JAX_DEFAULT_MATMUL_PRECISION=float32 timeout "${LIMIT_B:-200}" $PY benchmarks/vs_peers.py --models logistic10 \
        --sizes "${N_A:-1000000}" --contenders ours_fixed ours_auto nuts --budget "${BUDGET_B:-45}" --warm-max 60 --tag _device_f32 \
        --v-memory-gib 40 --no-long-reference --out "$OUT"
    echo "== B exit $?"
    echo "== C: vs_peers N = 5e6, our fixed route"
    timeout "${LIMIT_C:-100}" $PY benchmarks/vs_peers.py --models logistic10 --sizes "${N_C:-5000000}" \
        --contenders ours_fixed --budget 30 --warm-max 60 --tag _device_f32_5e6 --v-memory-gib 40 \
        --no-long-reference --out "$OUT"
    echo "== C exit $?"
    date -u
} 2>&1 | grep -v --line-buffered "^ *warn(\|FutureWarning\|ArviZ is undergoing\|Some upcoming changes\|migration_guide" \
    | tee "$OUT/device_session3_log.txt"
