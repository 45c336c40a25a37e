#!/usr/bin/env bash
# No file-scope mutable state in the libraries but the twin's documented "hardware" state
# (docs/architecture.md#mutable-state): every object in a writable data section (.data, .bss; not the
# read-only .rodata and .data.rel.ro) of the given static libraries must be in the allow-list below.
# Thread-local objects (.tdata, .tbss) are listed too: one per thread, they are still state a reader
# must know of. The coverage build's counters (__gcov*) are the instrumentation's, not the project's:
# not counted.
# Usage: globals.sh LIB.a...
set -u
allowed=(
    "sched_state.c.o g_sched"             # the running twin_run (one per process, single-threaded)
    "sched_state.c.o g_implicit"          # the implicit rank 0 of programs that never call twin_run
    "sched_state.c.o g_implicit_registry" # ... and its communicator groups
    "mp_job.c.o g_mp_sigterm"             # SIGTERM arrived (set by a signal handler: a sig_atomic_t)
    "kern_init_memo.c.o g_init_memo"      # generated parameter values by their full key (a pure cache)
    "pool.c.o t_in_job"                   # thread-local: this thread runs deferred device work
    "kern_gemm.c.o t_gemm_scratch"        # thread-local: a GEMM's panels, written before read (no value crosses calls)
)
[ $# -gt 0 ] || { echo "usage: globals.sh LIB.a..."; exit 2; }
fail=0 n=0
for lib in "$@"; do
    # a library that is missing or unreadable is a failure, not a library without state: objdump's
    # status is checked before its (then empty) listing is read
    if ! syms=$(objdump -t "$lib" 2>&1); then
        echo "FAIL: $lib: objdump cannot read it: $syms"
        fail=1
        continue
    fi
    while read -r obj sym; do
        n=$((n + 1))
        ok=0
        for a in "${allowed[@]}"; do [ "$a" = "$obj $sym" ] && ok=1; done
        if [ $ok = 0 ]; then
            echo "FAIL: $(basename "$lib"): $obj: $sym is mutable file-scope state; make it const, or pass it as an argument"
            fail=1
        fi
    done < <(printf '%s\n' "$syms" | awk '/^[^ ]+\.o:/ {obj = $1; sub(/:$/, "", obj)}
        $3 == "O" && ($4 ~ /^\.(data|bss)(\.|$)/) && $4 !~ /rel\.ro/ && $NF !~ /^__gcov/ {print obj, $NF; next}
        NF >= 4 && $(NF - 2) ~ /^\.t(data|bss)(\.|$)/ && $NF !~ /^__gcov/ {print obj, $NF}')
done
[ $fail = 0 ] && echo "globals: $n mutable objects, all in the allow-list (the twin's hardware state, two thread-local)"
exit $fail
