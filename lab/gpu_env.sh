# shellcheck shell=bash
# Sourced by the lab's GPU scripts (and cuda/tools/*.sh): what a cuda build needs, found on the system
# or taken from a local folder of .deb files (a GPU machine without internet), and the build itself.
# Sourcing it only defines functions; each one prints what went wrong on stderr and returns non-zero,
# and the scripts stop there.
#
#   lab_args "$@"           the options every GPU script takes: --debs DIR (or --debs=DIR: a folder of .deb
#                           files, default $TWINRUN_DEBS), --build DIR (the cuda build folder, default
#                           $TWINRUN_GPU_BUILD, else the script's own under /tmp), -h/--help (prints the
#                           script's header comment);
#                           sets DEBS and GPU_BUILD, and leaves everything else, in order, in ARGS
#   lab_deps [DEBS_DIR]     finds nvcc, cmake, gcc, pkg-config and the libraries (cJSON, zlib, PCRE2, cmocka)
#                           on the system; whatever is missing comes from DEBS_DIR's .deb files, unpacked
#                           under $TWINRUN_DEBS_PREFIX (default /tmp/twinrun-debs), never into /. NCCL:
#                           the toolkit's, the system's, the .debs' (libnccl2, libnccl-dev) or the Python
#                           wheel's (nvidia-nccl-cu*); cuDNN 9 (optional) the same way. Sets CMAKE_EXTRA (an
#                           array of configure flags), NVCC, LD_LIBRARY_PATH / LIBRARY_PATH / PKG_CONFIG_PATH
#                           where needed, and NCCL_NVLS_ENABLE=0 unless the caller set it (NVLink SHARP
#                           multicast off: every figure in docs/ was measured without it)
#   gpu_build DIR LOG [TARGET...]
#                           configures the cuda backend (Release) in DIR and builds the targets (every target
#                           without any), its output into LOG; its status is the build's. The CUDA
#                           architecture: $TWINRUN_CUDA_ARCH, else the first GPU's compute capability
#                           (nvidia-smi), else 90
#   lab_outdir DIR          makes DIR (and its parents) and prints its absolute path, or stops the script
#   lab_commit              the commit the tree is at: git, else the file .gpu_commit at the root (for a copy
#                           of the tree without .git: `git rev-parse --short HEAD > .gpu_commit` beforehand)
#   lab_die MESSAGE...      prints "NAME: MESSAGE" on stderr and exits 1
#
# The Debian packages (apt-get install, or `apt-get download` on a machine with internet into DEBS_DIR):
#   libcjson1 libcjson-dev zlib1g zlib1g-dev libpcre2-8-0 libpcre2-dev libcmocka0 libcmocka-dev
#   pkgconf pkgconf-bin libpkgconf3 pkg-config; for NCCL where neither the toolkit nor a wheel has it:
#   libnccl2 libnccl-dev (NVIDIA's CUDA repository).

lab_die() {
    echo "$(basename "$0"): $*" >&2
    exit 1
}

lab_args() {
    local a
    DEBS=${TWINRUN_DEBS:-}
    GPU_BUILD=${TWINRUN_GPU_BUILD:-}
    ARGS=()
    while [ $# -gt 0 ]; do
        a=$1
        shift
        case $a in
        --debs) [ $# -gt 0 ] || lab_die "--debs needs a folder"; DEBS=$1; shift ;;
        --debs=*) DEBS=${a#--debs=} ;;
        --build) [ $# -gt 0 ] || lab_die "--build needs a folder"; GPU_BUILD=$1; shift ;;
        --build=*) GPU_BUILD=${a#--build=} ;;
        -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        *) ARGS+=("$a") ;;
        esac
    done
    if [ -n "$DEBS" ]; then
        [ -d "$DEBS" ] || lab_die "--debs $DEBS: no such folder"
        DEBS=$(cd "$DEBS" && pwd)
    fi
    export TWINRUN_DEBS=$DEBS
    return 0
}

lab_outdir() {
    [ -n "$1" ] || lab_die "no output folder given"
    mkdir -p "$1" || lab_die "cannot make the output folder $1"
    (cd "$1" && pwd)
}

# lab_twin_outdir USAGE WRITER: after lab_args, the scripts that compare with the twin's side take
# [--twin DIR] OUTDIR; sets TWIN (absolute; default .gpu_inputs at the repository root, which WRITER
# fills) and OUTDIR (made if absent)
lab_twin_outdir() {
    local usage=$1 writer=$2 pos=()
    TWIN=$(dirname "$0")/../.gpu_inputs
    set -- "${ARGS[@]}"
    while [ $# -gt 0 ]; do
        case $1 in
        --twin) TWIN=${2:?--twin needs a folder}; shift 2 ;;
        -*) lab_die "unknown option $1" ;;
        *) pos+=("$1"); shift ;;
        esac
    done
    [ ${#pos[@]} -eq 1 ] || lab_die "usage: $usage"
    OUTDIR=$(lab_outdir "${pos[0]}") || exit 1
    [ -d "$TWIN" ] || lab_die "--twin $TWIN: no such folder ($writer writes it)"
    TWIN=$(cd "$TWIN" && pwd)
}

# lab_model NAME: the benchmark models' shapes (lab/gpu_bench.sh, lab/gpu_calibrate.sh) as LAB_L (layers),
# LAB_H (hidden), LAB_F (FFN), LAB_NH (heads), LAB_G (query groups); the vocabulary is Llama-3's 128256.
#   llama1.5b     the 1.5B Llama-3-style model; llama8b-8l, llama70b-2l: the 8B and 70B seeds' layers, as
#                 many as fit one card beside PyTorch's recipes
lab_model() {
    case $1 in
    llama1.5b) LAB_L=16 LAB_H=2048 LAB_F=8192 LAB_NH=32 LAB_G=8 ;;
    llama8b-8l) LAB_L=8 LAB_H=4096 LAB_F=14336 LAB_NH=32 LAB_G=8 ;;
    llama70b-2l) LAB_L=2 LAB_H=8192 LAB_F=28672 LAB_NH=64 LAB_G=8 ;;
    *) lab_die "unknown model $1 (llama1.5b, llama8b-8l, llama70b-2l)" ;;
    esac
}

lab_commit() { # "-dirty" when the files differ from the commit's: results then name no commit exactly
    local c
    c=$(git rev-parse --short HEAD 2>/dev/null) || { cat .gpu_commit 2>/dev/null || echo unknown; return; }
    git diff --quiet HEAD -- 2>/dev/null || c="$c-dirty"
    echo "$c"
}

# _lab_missing: the pkg-config modules the build needs that pkg-config does not find
_lab_missing() {
    local m out=""
    for m in libcjson zlib libpcre2-8 cmocka; do
        "${PKG_CONFIG:-pkg-config}" --exists "$m" 2>/dev/null || out="$out $m"
    done
    echo "${out# }"
}

lab_deps() {
    local debs=${1:-${DEBS:-${TWINRUN_DEBS:-}}} P=${TWINRUN_DEBS_PREFIX:-/tmp/twinrun-debs} ma missing f tool nr cr
    export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
    CMAKE_EXTRA=()
    ma=$(gcc -print-multiarch 2>/dev/null || true)
    ma=${ma:-$(uname -m)-linux-gnu}
    for tool in cmake gcc python3; do
        command -v "$tool" >/dev/null || { echo "lab_deps: no $tool on PATH (apt-get install $tool)" >&2; return 1; }
    done
    NVCC=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
    [ -x "$NVCC" ] || { echo "lab_deps: no nvcc (PATH, /usr/local/cuda/bin): install the CUDA toolkit or set CUDACXX" >&2; return 1; }
    export NVCC

    if command -v pkg-config >/dev/null; then missing=$(_lab_missing); else missing="pkg-config"; fi
    if [ -n "$missing" ]; then
        if [ -z "$debs" ]; then
            echo "lab_deps: missing on this system: $missing" >&2
            echo "  install them (ci/deps.sh names the Debian packages), or give a folder of .deb files with" >&2
            echo "  --debs DIR (TWINRUN_DEBS=DIR): lab/README.md, \"Dependencies\", lists which" >&2
            return 1
        fi
        compgen -G "$debs/*.deb" >/dev/null || { echo "lab_deps: $debs holds no .deb files (missing: $missing)" >&2; return 1; }
        echo "lab_deps: missing on this system: $missing; unpacking $debs/*.deb under $P"
        mkdir -p "$P" || return 1
        for f in "$debs"/*.deb; do
            dpkg -x "$f" "$P" || { echo "lab_deps: dpkg -x $f failed" >&2; return 1; }
        done
        for f in "$P"/usr/lib/"$ma"/pkgconfig/*.pc "$P"/usr/share/pkgconfig/*.pc; do
            [ -e "$f" ] || continue
            sed -i "s|^prefix=/usr|prefix=$P/usr|; s|=/usr/|=$P/usr/|g" "$f" || return 1
        done
        # the unversioned libz.so of zlib1g-dev points into /lib: the unpacked copy
        for f in "$P"/lib/"$ma"/libz.so.1.* "$P"/usr/lib/"$ma"/libz.so.1.*; do
            [ -e "$f" ] && { ln -sf "$f" "$P/usr/lib/$ma/libz.so" || return 1; }
        done
        export LIBRARY_PATH=$P/usr/lib/$ma:$P/lib/$ma${LIBRARY_PATH:+:$LIBRARY_PATH}
        export LD_LIBRARY_PATH=$P/usr/lib/$ma:$P/lib/$ma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        export PKG_CONFIG_PATH=$P/usr/lib/$ma/pkgconfig:$P/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
        if ! command -v pkg-config >/dev/null; then
            for f in "$P/usr/bin/pkgconf" "$P/usr/bin/pkg-config"; do
                [ -x "$f" ] && { export PKG_CONFIG=$f; break; }
            done
            [ -n "${PKG_CONFIG:-}" ] || { echo "lab_deps: no pkg-config on the system or in $debs (pkgconf, pkgconf-bin, libpkgconf3)" >&2; return 1; }
            CMAKE_EXTRA+=("-DPKG_CONFIG_EXECUTABLE=$PKG_CONFIG")
        fi
        missing=$(_lab_missing)
        [ -z "$missing" ] || { echo "lab_deps: still missing after unpacking $debs: $missing" >&2; return 1; }
    fi

    # NCCL: the toolkit's or the system's (CMake finds those itself), the .debs', else the Python wheel's
    if [ -e "$(dirname "$NVCC")/../include/nccl.h" ] || [ -e /usr/include/nccl.h ] ||
        { [ -n "${NCCL_ROOT:-}" ] && [ -e "$NCCL_ROOT/include/nccl.h" ]; }; then
        :
    elif [ -e "$P/usr/include/nccl.h" ]; then
        # libnccl-dev's library sits under lib/<multiarch>: a prefix with include/ and lib/ for CMake
        mkdir -p "$P/nccl" && ln -sfn "$P/usr/include" "$P/nccl/include" && ln -sfn "$P/usr/lib/$ma" "$P/nccl/lib" || return 1
        CMAKE_EXTRA+=(-DNCCL_ROOT="$P/nccl")
        export LD_LIBRARY_PATH=$P/usr/lib/$ma${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    elif nr=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null) && [ -n "$nr" ]; then
        CMAKE_EXTRA+=(-DNCCL_ROOT="$nr")
        export LD_LIBRARY_PATH=$nr/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    else
        echo "lab_deps: no NCCL (the toolkit, /usr/include, NCCL_ROOT, libnccl-dev in --debs, or pip's nvidia-nccl-cu12)" >&2
        return 1
    fi
    # cuDNN 9 (optional; kern_attention_cudnn.c): the toolkit's, the system's, else PyTorch's wheel; its
    # engine libraries are opened at run time from the loader's path
    if [ ! -e "$(dirname "$NVCC")/../include/cudnn_version.h" ] && [ ! -e /usr/include/cudnn_version.h ] &&
        [ ! -e "/usr/include/$ma/cudnn_version.h" ]; then
        if cr=$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null) && [ -n "$cr" ]; then
            CMAKE_EXTRA+=(-DCUDNN_ROOT="$cr")
            export LD_LIBRARY_PATH=$cr/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
        fi
    fi
    echo "lab_deps: nvcc $NVCC; configure extras: ${CMAKE_EXTRA[*]:-none}"
    return 0
}

gpu_build() {
    local b=$1 log=$2 t=() x arch=${TWINRUN_CUDA_ARCH:-}
    shift 2
    for x in "$@"; do t+=(--target "$x"); done
    if [ -z "$arch" ]; then
        arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ' || true)
        [[ $arch =~ ^[0-9]+$ ]] || arch=90
    fi
    { cmake -S . -B "$b" -DTWINRUN_BACKEND=cuda -DCMAKE_C_COMPILER=gcc -DCMAKE_CUDA_COMPILER="$NVCC" \
        -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_BUILD_TYPE=Release "${CMAKE_EXTRA[@]}" &&
        cmake --build "$b" -j"$(nproc)" "${t[@]}"; } >"$log" 2>&1
}
