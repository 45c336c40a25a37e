# shellcheck shell=bash
# The LC_* variables are set here for the sourcing script (SC2034), and the single quotes inside
# double-quoted messages are quote marks around a value, not shell quoting (SC2016).
# shellcheck disable=SC2034,SC2016
# =============================================================================
# What twinrun's two launchers share, sourced by scripts/launch_llama3.sh (the 8B tutorial's
# once-per-node script) and scripts/train_llama3_70b_multi_nodes.sh (the 70B guide's mpirun entry
# point): messages and value checks, option parsing helpers, finding this node's GPUs (nvidia-smi and
# mthreads-gmi), choosing the backend and its train_llama3, reading an OpenMPI hostfile, the rendezvous
# token, and printing command lines so that they can be pasted back into a shell.
#
# The caller sets LC_PROG (its name in messages) and LC_ROOT (the repository root) before using these.
# Functions are lc_*; what they hand back is in LC_* variables (bash functions cannot return arrays).
# =============================================================================

# Errors exit 2: the job was not started because of how it was asked for (a training failure keeps
# train_llama3's own code). The Chinese prefix matches the seeds' messages, the rest says the fix.
lc_die() {
    echo "$LC_PROG: 错误: $*" >&2
    exit 2
}
lc_warn() { echo "$LC_PROG: 警告: $*" >&2; }
lc_is_uint() { [[ "$1" =~ ^[0-9]+$ ]]; }
lc_need_pos() { # VAR: the variable must hold a positive integer
    { lc_is_uint "${!1}" && [ "${!1}" -ge 1 ]; } || lc_die "$1=${!1} 不是正整数 (must be a positive integer)"
}

# ---- options -------------------------------------------------------------------------------------
# Users type the guide's spellings (--dataset_dir, --data_format); hyphens are accepted as the same
# option, so "--dataset-dir" is not an unknown option. Matching is done on the hyphenated form.
lc_norm_opt() { local o=${1%%=*}; printf '%s' "${o//_/-}"; }

# lc_opt_value OPT NEXT_COUNT NEXT: the value of an option that takes one. "--opt=value" carries it
# inline; otherwise it is the next word, which must exist and must not itself be an option, so that
# "--dataset_dir --data_format bf16" is an error instead of a data set called "--data_format".
# Sets LC_VAL and LC_SHIFT (how many words the caller consumes).
lc_opt_value() {
    local opt=$1 n=$2 next=${3-}
    if [[ "$opt" == *=* ]]; then
        LC_VAL=${opt#*=} LC_SHIFT=1
        [ -n "$LC_VAL" ] || lc_die "${opt%%=*} 缺少取值 (needs a value after '=')"
        return 0
    fi
    if [ "$n" -lt 1 ] || [[ "$next" == -* && "$next" != - ]]; then
        lc_die "$opt 缺少取值 (needs a value${next:+; '$next' is an option, not a value}; see --help)"
    fi
    LC_VAL=$next LC_SHIFT=2
}

# lc_unknown_option OPT VALID...: names the valid options, so a typo or another script's option is
# told what this script takes.
lc_unknown_option() {
    local opt=$1
    shift
    lc_die "未知选项 (unknown option) '$opt'; valid options: $* (see --help)"
}

# lc_check_choice NAME VALUE CHOICES...
lc_check_choice() {
    local name=$1 value=$2 c
    shift 2
    for c in "$@"; do [ "$value" = "$c" ] && return 0; done
    lc_die "$name '$value' 无效 (invalid): use one of: $*"
}

# ---- printing commands -----------------------------------------------------------------------------
# lc_quote_cmd WORDS...: one line, each word as a shell needs it: plain words as they are (flags,
# paths, 99,1,0), anything else in single quotes, so a dry run's lines can be pasted into a shell
# (printf %q would escape the commas too). Built in a variable, not a subshell a word: a fork costs
# tens of milliseconds on a loaded machine, and a command line has a hundred words.
lc_quote_cmd() {
    local w line='' sep=''
    for w in "$@"; do
        if [[ "$w" =~ ^[A-Za-z0-9_./:=,+@%^-]+$ ]]; then
            line+="$sep$w"
        else
            line+="$sep'${w//\'/\'\\\'\'}'"
        fi
        sep=' '
    done
    printf '%s\n' "$line"
}

# ---- GPUs on this node ----------------------------------------------------------------------------
# lc_count_gpus LISTING: the "GPU i" lines (grep -c exits 1 on none, which set -e would take for an error)
lc_count_gpus() { printf '%s\n' "$1" | grep -Ec '^GPU [0-9]+' || true; }

# lc_visible LISTING VISIBLE: how many of the GPUs in LISTING (the tool's "GPU i: name (UUID: u)"
# lines) a *_VISIBLE_DEVICES value leaves. Unset is handled by the caller (everything); "" or none/void
# hides them all; "all" keeps them; otherwise a comma list of indices or UUIDs, read as CUDA reads
# CUDA_VISIBLE_DEVICES: up to the first entry that names no listed GPU (-1 included).
lc_visible() {
    local listing=$1 vis=$2 total entry n=0
    total=$(lc_count_gpus "$listing")
    case "$vis" in
    "" | none | void | NoDevFiles) echo 0; return ;;
    all) echo "$total"; return ;;
    esac
    local IFS=,
    for entry in $vis; do
        entry=${entry// /}
        if lc_is_uint "$entry"; then
            [ "$entry" -lt "$total" ] || break
        elif [ -n "$entry" ] && grep -Fq -- "$entry" <<<"$listing"; then
            :
        else
            break
        fi
        n=$((n + 1))
    done
    echo "$n"
}

# lc_detect_gpus: LC_NVIDIA_GPUS from `nvidia-smi --list-gpus` within CUDA_VISIBLE_DEVICES, and
# LC_MTHREADS_GPUS from `mthreads-gmi -L` (Moore Threads' tool; MTT S5000 nodes have no nvidia-smi)
# within MTHREADS_VISIBLE_DEVICES (the container runtime's, as the 70B guide's `docker run -e`) and then
# MUSA_VISIBLE_DEVICES (the MUSA runtime's). LC_GPU_TOOLS says which tools were found, for messages.
lc_detect_gpus() {
    local out
    LC_NVIDIA_GPUS=0 LC_MTHREADS_GPUS=0 LC_GPU_TOOLS=
    if command -v nvidia-smi >/dev/null 2>&1; then
        out=$(nvidia-smi --list-gpus 2>/dev/null || true)
        LC_NVIDIA_GPUS=$(lc_count_gpus "$out")
        if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then LC_NVIDIA_GPUS=$(lc_visible "$out" "$CUDA_VISIBLE_DEVICES"); fi
        LC_GPU_TOOLS+="nvidia-smi lists $LC_NVIDIA_GPUS${CUDA_VISIBLE_DEVICES+ within CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES'}; "
    else
        LC_GPU_TOOLS+="no nvidia-smi; "
    fi
    if command -v mthreads-gmi >/dev/null 2>&1; then
        out=$(mthreads-gmi -L 2>/dev/null || true)
        LC_MTHREADS_GPUS=$(lc_count_gpus "$out")
        if [ -n "${MTHREADS_VISIBLE_DEVICES+set}" ]; then
            LC_MTHREADS_GPUS=$(lc_visible "$out" "$MTHREADS_VISIBLE_DEVICES")
        fi
        if [ -n "${MUSA_VISIBLE_DEVICES+set}" ]; then
            local m
            m=$(lc_visible "$out" "$MUSA_VISIBLE_DEVICES")
            [ "$m" -lt "$LC_MTHREADS_GPUS" ] && LC_MTHREADS_GPUS=$m
        fi
        LC_GPU_TOOLS+="mthreads-gmi lists $LC_MTHREADS_GPUS${MTHREADS_VISIBLE_DEVICES+ within MTHREADS_VISIBLE_DEVICES='$MTHREADS_VISIBLE_DEVICES'}${MUSA_VISIBLE_DEVICES+ and MUSA_VISIBLE_DEVICES='$MUSA_VISIBLE_DEVICES'}"
    else
        LC_GPU_TOOLS+="no mthreads-gmi"
    fi
}

# lc_select_backend REQUESTED [NEEDS_LOCAL_GPU]: LC_BACKEND (cuda | musa | twin) and LC_GPUS (this
# node's GPUs of that kind). "auto" takes the GPUs this node has: MUSA with mthreads-gmi's, CUDA with
# nvidia-smi's. The CPU twin is never a fallback: it runs only when asked for, so a GPU node whose
# driver is not visible fails here instead of training on the CPU with only the summary to show it.
lc_select_backend() {
    local want=$1
    lc_check_choice "--backend (TWINRUN_BACKEND)" "$want" auto cuda musa twin
    lc_detect_gpus
    case "$want" in
    auto)
        if [ "$LC_NVIDIA_GPUS" -gt 0 ] && [ "$LC_MTHREADS_GPUS" -gt 0 ]; then
            lc_die "this node has both NVIDIA and Moore Threads GPUs ($LC_GPU_TOOLS): choose one with --backend cuda or --backend musa"
        elif [ "$LC_MTHREADS_GPUS" -gt 0 ]; then
            LC_BACKEND=musa LC_GPUS=$LC_MTHREADS_GPUS
        elif [ "$LC_NVIDIA_GPUS" -gt 0 ]; then
            LC_BACKEND=cuda LC_GPUS=$LC_NVIDIA_GPUS
        else
            lc_die "没有找到 GPU (no GPU found on this node: $LC_GPU_TOOLS). To rehearse on the CPU twin, ask for it: --backend twin (or TWINRUN_BACKEND=twin); on a node whose GPUs the tools cannot see, name the backend: --backend cuda or --backend musa"
        fi ;;
    cuda) LC_BACKEND=cuda LC_GPUS=$LC_NVIDIA_GPUS ;;
    musa) LC_BACKEND=musa LC_GPUS=$LC_MTHREADS_GPUS ;;
    twin) LC_BACKEND=twin LC_GPUS=0 ;;
    esac
}

# lc_train_bin BACKEND: TRAIN_BIN as given, else the build of that backend under TWINRUN_BUILD_ROOT
# (default: the repository's build/, whose cuda, musa and twin folders the presets make). No other build
# stands in for a missing one: the CUDA binary on a MUSA node would fail at its first call, the twin's
# would train on the CPU.
lc_train_bin() {
    local backend=$1
    if [ -z "${TRAIN_BIN:-}" ]; then
        TRAIN_BIN="${TWINRUN_BUILD_ROOT:-$LC_ROOT/build}/$backend/bin/train_llama3"
        [ -x "$TRAIN_BIN" ] ||
            lc_die "找不到训练程序 train_llama3 ($TRAIN_BIN) for backend $backend: build it (cmake --preset $backend && cmake --build build/$backend -j) or set TRAIN_BIN"
    fi
    [ -x "$TRAIN_BIN" ] || lc_die "TRAIN_BIN=$TRAIN_BIN is not an executable"
}

# ---- hostfile -------------------------------------------------------------------------------------
# lc_read_hostfile FILE: OpenMPI's format as the 70B guide writes it (§2.2): "host slots=N" a line,
# '#' comments and blank lines skipped, max_slots=M allowed. Every host needs slots=N (the job's size is
# their sum, WORLD_SIZE = TP × PP × CP × DP) and appears once. Sets LC_HOSTS, LC_SLOTS (arrays) and
# LC_SLOT_TOTAL; a problem names the file, the line and what a line should look like.
lc_read_hostfile() {
    local file=$1 line n=0 host slots word
    local -A seen=()
    LC_HOSTS=() LC_SLOTS=() LC_SLOT_TOTAL=0
    local fmt="a line is 'host slots=N', e.g. 'train-node-000 slots=8' (OpenMPI's hostfile, the 70B guide's §2.2)"
    [ -e "$file" ] || lc_die "找不到 hostfile '$file' (run in the training directory that holds ./hostfile, or pass --hostfile FILE): $fmt"
    { [ -f "$file" ] && [ -r "$file" ]; } || lc_die "hostfile '$file' is not a readable file"
    while IFS= read -r line || [ -n "$line" ]; do
        n=$((n + 1))
        line=${line%%#*}
        read -r -a words <<<"$line"
        [ ${#words[@]} -gt 0 ] || continue
        host=${words[0]} slots=
        for word in "${words[@]:1}"; do
            case "$word" in
            slots=*) slots=${word#slots=} ;;
            max_slots=*) lc_is_uint "${word#max_slots=}" || lc_die "hostfile $file line $n: '$word' is not max_slots=N" ;;
            *) lc_die "hostfile $file line $n: '$word' is not understood: $fmt" ;;
            esac
        done
        [[ "$host" != *=* ]] || lc_die "hostfile $file line $n: the line starts with '$host', not a host name: $fmt"
        [ -n "$slots" ] || lc_die "hostfile $file line $n: '$host' has no slots=N: $fmt"
        { lc_is_uint "$slots" && [ "$slots" -ge 1 ]; } ||
            lc_die "hostfile $file line $n: slots=$slots is not a positive integer: $fmt"
        [ -z "${seen[$host]:-}" ] || lc_die "hostfile $file line $n: '$host' is listed twice (lines ${seen[$host]} and $n)"
        seen[$host]=$n
        LC_HOSTS+=("$host")
        LC_SLOTS+=("$slots")
        LC_SLOT_TOTAL=$((LC_SLOT_TOTAL + slots))
    done <"$file"
    [ ${#LC_HOSTS[@]} -gt 0 ] || lc_die "hostfile '$file' lists no host: $fmt"
}

# lc_is_this_host NAME: NAME is this machine (loopback, or its short or full host name).
lc_is_this_host() {
    case "$1" in localhost | 127.0.0.1 | ::1) return 0 ;; esac
    [ "$1" = "$(hostname 2>/dev/null)" ] || [ "$1" = "$(hostname -s 2>/dev/null)" ] ||
        [ "$1" = "$(hostname -f 2>/dev/null)" ]
}

# ---- the rendezvous token --------------------------------------------------------------------------
# A fresh secret for a job whose every process this launcher starts (it is then the same for all
# ranks); a job of several separately-started launchers must take it from the job's spec instead.
lc_new_token() { od -An -N16 -tx1 /dev/urandom | tr -d ' \n'; }
