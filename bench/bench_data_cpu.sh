#!/usr/bin/env bash
# bench_data_cpu: what the data threads and the prefetch do to CPU training:
# gpp-train on the CPU backend (the models, batches and kernel threads of
# bench/bench_train.sh) with synthetic data on 1 thread without prefetch
# (what gpp-train did before --data-threads), on the default threads without
# prefetch (the CPU default), and on the default threads with prefetch
# (--data-prefetch on: the next micro-batch generated while the kernels run,
# on the same cores).
#
# Each setting runs ROUNDS times, alternating, and the best round counts
# (a shared machine). A round times ITERS iterations after WARMUP untimed
# ones; samples/s = batch x iterations / their wall time; the CPU-time column
# divides by the process CPU time (all threads) instead.
#
# usage: bench/bench_data_cpu.sh [BUILD_DIR] [THREADS]
#   env: ROUNDS (3), ITERS (10), WARMUP (3)
set -eu
. "$(dirname "$0")/cpu_train_common.sh" "$@"
SETTINGS=("--data-threads 1 --data-prefetch off" "--data-prefetch off" "--data-prefetch on")

# One round -> "wall_rate cpu_rate"
round() {
    # shellcheck disable=SC2086
    "$TRAIN" --model "$1" --batch "$2" --iterations $((WARMUP + ITERS)) --threads "$THREADS" $3 |
        gpp_rates "$2"
}

echo "# $(getconf _NPROCESSORS_ONLN) online CPUs; kernel threads $THREADS; best of $ROUNDS rounds"
printf '| model | batch | data settings | samples/s | CPU-time samples/s |\n|---|---|---|---|---|\n'
for entry in "${MODELS[@]}"; do
    spec=${entry% *}
    batch=${entry##* }
    declare -A W=() C=()
    for _ in $(seq "$ROUNDS"); do
        for s in "${!SETTINGS[@]}"; do
            read -r w c < <(round "$spec" "$batch" "${SETTINGS[$s]}")
            W[$s]="${W[$s]:-} $w" C[$s]="${C[$s]:-} $c"
        done
    done
    for s in "${!SETTINGS[@]}"; do
        # shellcheck disable=SC2086
        printf '| `%s` | %s | `%s` | %s | %s |\n' "$spec" "$batch" "${SETTINGS[$s]}" \
            "$(best ${W[$s]})" "$(best ${C[$s]})"
    done
    unset W C
done
