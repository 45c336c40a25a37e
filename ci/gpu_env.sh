# shellcheck shell=bash
# Sourced by ci/gpu_multi.sh on the GPU machine: what the image lacks, from a folder of .deb files
# (cmocka, cJSON, pkg-config, zlib, libyaml; unpacked under /tmp, never into /), NCCL and cuDNN from
# the Python wheels when the toolkit has none, and NVLink multicast kept off (the machine's rule).
# Sets CMAKE_EXTRA (an array) for the configure step. Sourced by cuda/tools/device_check.sh too.
# gpu_build DIR LOG [TARGET...]: configures the cuda backend (Release, sm_90) in DIR and builds the
# targets (every target without any), the output into LOG; its status is the build's.
export NCCL_NVLS_ENABLE=0
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
CMAKE_EXTRA=()
if ! pkg-config --exists cmocka libcjson 2>/dev/null; then
    P=/tmp/twinrun-debs
    mkdir -p $P
    for f in "${DEBS:-.debs}"/*.deb; do dpkg -x "$f" $P; done
    sed -i "s|/usr/|$P/usr/|g" $P/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc
    for z in $P/lib/x86_64-linux-gnu/libz.so.1.*; do [ -e "$z" ] && ln -sf "$z" $P/usr/lib/x86_64-linux-gnu/libz.so; done
    export LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu:$P/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}
    export PKG_CONFIG_PATH=$P/usr/lib/x86_64-linux-gnu/pkgconfig
    export LD_LIBRARY_PATH=$P/usr/lib/x86_64-linux-gnu:$P/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    command -v pkg-config >/dev/null || CMAKE_EXTRA+=("-DPKG_CONFIG_EXECUTABLE=$P/usr/bin/pkgconf")
fi
if [ ! -e "$(dirname "$NVCC")/../include/nccl.h" ]; then
    NR=$(python3 -c 'import nvidia.nccl as m; print(m.__path__[0])' 2>/dev/null)
    if [ -n "$NR" ]; then
        CMAKE_EXTRA+=(-DNCCL_ROOT="$NR")
        export LD_LIBRARY_PATH=$NR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    fi
fi
# cuDNN 9 (kern_attention_cudnn.c): the toolkit's copy, else PyTorch's wheel; its engine libraries are
# opened at run time from the loader's path
if [ ! -e "$(dirname "$NVCC")/../include/cudnn_version.h" ]; then
    CR=$(python3 -c 'import nvidia.cudnn as m; print(m.__path__[0])' 2>/dev/null)
    if [ -n "$CR" ]; then
        CMAKE_EXTRA+=(-DCUDNN_ROOT="$CR")
        export LD_LIBRARY_PATH=$CR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    fi
fi
gpu_build() {
    local b=$1 log=$2 t=()
    shift 2
    for x in "$@"; do t+=(--target "$x"); done
    { cmake -S . -B "$b" -DTWINRUN_BACKEND=cuda -DCMAKE_C_COMPILER=gcc -DCMAKE_CUDA_COMPILER="$NVCC" \
        -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release "${CMAKE_EXTRA[@]}" &&
        cmake --build "$b" -j"$(nproc)" "${t[@]}"; } >"$log" 2>&1
}
