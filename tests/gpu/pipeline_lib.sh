# pipeline_lib: what the GPU pipeline scripts (test_cuda_pipeline,
# test_nccl_pipeline) share; sourced after gpp_test_begin ($SRC, $TMP).

# job_conf EXAMPLE NAME: config/examples/EXAMPLE with this run's port,
# $ITERS iterations, checkpoints in $TMP/NAME.ckpt and metrics in
# $TMP/NAME.jsonl, written to $TMP/NAME.toml; prints that path.
# The CPU runs' plans are replayed on cuda/nccl agents, which have no split
# backward: every job here plans 1f1b (auto would pick zero-bubble on CPU).
job_conf() {
    sed -e "s|^endpoint = .*|endpoint = \"tcp://127.0.0.1:$(free_port 1)\"|" \
        -e 's|^\[job\]|[job]\nschedule = "1f1b"|' \
        -e "s|^iterations = .*|iterations = $ITERS|" \
        -e "s|^checkpoint_dir = .*|checkpoint_dir = \"$TMP/$2.ckpt\"|" \
        -e "s|^file = .*|file = \"$TMP/$2.jsonl\"|" "$SRC/config/examples/$1" >"$TMP/$2.toml"
    echo "$TMP/$2.toml"
}

# losses OUT: the loss of each of the coordinator's "iter i/N  loss L" lines
losses() { sed -n 's/^iter [0-9]*\/[0-9]*  loss \([0-9.eE+-]*\).*/\1/p' "$1"; }

# losses_close A B N: files A and B hold N losses each, pairwise within 2e-3
# relative (fp32 with other summation orders, grown over AdamW steps);
# prints the largest difference
losses_close() {
    paste "$1" "$2" |
        awk -v n="$3" '{ d = $1 - $2; if (d < 0) d = -d; r = d / ($1 > 0 ? $1 : -$1);
               if (r > m) m = r; if (r > 2e-3 || NF != 2) bad = 1 }
             END { printf "max rel loss difference %g over %d iterations\n", m, NR; exit bad || NR != n }'
}
