#!/usr/bin/env bash
# Second lent-GPU call of a session: NumPyro NUTS with jit_model_args=True (the data as arguments of the
# compiled programs) beside our fixed route at N = 1e6 and 5e6, where NumPyro's defaults did not finish
# within 120 s (device_session.sh). Usage as device_session.sh.
set -u
OUT=${1:?usage: device_session2.sh OUT_DIR}
mkdir -p "$OUT"
PY=${PY:-python3}
if [ -z "${SKIP_WHEELS:-}" ] && [ -d .whl ]; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1
{
    for n in ${SIZES:-1000000 5000000}; do
        echo "== vs_peers N=$n"
        timeout "${LIMIT:-140}" $PY benchmarks/vs_peers.py --models logistic10 --sizes "$n" \
            --contenders nuts_jit_args ours_fixed --budget 30 --warm-max 60 --tag "_device_jit_$n" \
            --v-memory-gib 40 --no-long-reference --out "$OUT"
        echo "== exit $?"
    done
} 2>&1 | grep -v --line-buffered "^ *warn(\|FutureWarning\|ArviZ is undergoing\|Some upcoming changes\|migration_guide" \
    | tee "$OUT/device_session2_log.txt"
