# blas-env.sh: source it (". scripts/blas-env.sh") before running gpp or
# PyTorch on the CPU. OpenBLAS (DYNAMIC_ARCH) picks its kernels from the CPU
# model and falls back to slow SSE3 Prescott kernels on VMs that report a
# generic model; the gpp CPU backend warns when that happens. This exports
# OPENBLAS_CORETYPE only when it is unset, and only to a core type the CPU
# can run: SkylakeX with avx512f in /proc/cpuinfo, Haswell with avx2, else
# nothing (OpenBLAS's own choice stands). Forcing SkylakeX on a CPU without
# AVX-512 dies with an illegal instruction.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -r /proc/cpuinfo ]; then
    if grep -qw avx512f /proc/cpuinfo; then
        export OPENBLAS_CORETYPE=SkylakeX
    elif grep -qw avx2 /proc/cpuinfo; then
        export OPENBLAS_CORETYPE=Haswell
    fi
fi
