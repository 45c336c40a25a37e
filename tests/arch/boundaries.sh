#!/usr/bin/env bash
# The architecture check (ci/check_boundaries.py) passes on the tree and fails on each kind of
# violation planted in a copy of it: engine -> twin, twin -> runner, backend -> backend, a reach into
# the engine's internals, an include loop between folders, an include guard of another style.
# Usage: boundaries.sh SOURCE_DIR WORK_DIR
set -u
src=$1 work=$2
fail=0
python3 "$src/ci/check_boundaries.py" "$src" || { echo "FAIL: the tree itself does not pass"; fail=1; }

# plant NAME FILE LINE EXPECTED: LINE goes before FILE's first #include in a fresh copy of the tree
# (a LINE "OLD=>NEW" replaces OLD with NEW instead); the check must exit 1 and say EXPECTED
plant() {
    local name=$1 file=$2 line=$3 expected=$4 dir="$work/$1"
    rm -rf "$dir" && mkdir -p "$dir"
    cp -r "$src/engine" "$src/sim" "$src/runner" "$src/fault" "$dir/"
    python3 - "$dir/$file" "$line" <<'PY'
import sys
path, line = sys.argv[1], sys.argv[2]
text = open(path).read()
if "=>" in line:
    old, new = line.split("=>")
    text = text.replace(old, new)
else:
    i = text.index("#include")
    text = text[:i] + line + "\n" + text[i:]
open(path, "w").write(text)
PY
    local out rc
    out=$(python3 "$src/ci/check_boundaries.py" "$dir")
    rc=$?
    if [ "$rc" -ne 1 ]; then
        echo "FAIL: planted $name: exit code $rc, expected 1"; fail=1
    elif ! grep -qF -- "$expected" <<<"$out"; then
        echo "FAIL: planted $name: no '$expected' in:"; echo "$out"; fail=1
    else
        echo "caught $name: $(grep -F -- "$expected" <<<"$out" | head -1)"
    fi
}
plant engine_to_twin engine/train/trainer.c '#include "../../sim/include/twin.h"' \
    'engine includes sim/include/twin.h (twin-public): not allowed'
plant twin_to_runner sim/sched/sched_run.c '#include "../../runner/include/runner/report.h"' \
    'twin includes runner/include/runner/report.h (runner-public): not allowed'
plant cuda_to_twin engine/cuda/coll_nccl.c '#include "../../sim/sched/sched_internal.h"' \
    'cuda includes sim/sched/sched_internal.h (twin): not allowed'
plant runner_to_engine_internals runner/runner_job.c '#include "model/llama.h"' \
    '"model/llama.h" is not a header runner can see'
plant dotdot sim/coll/coll_api.c '#include "../sched/sched_internal.h"' 'no "../" in includes'
plant folder_loop sim/sched/sched_state.c '#include "coll/coll_internal.h"' \
    'include loop between folders: sim/coll <-> sim/sched'
plant guard engine/ckpt/ckpt.h 'TWINRUN_ENGINE_CKPT_CKPT_H=>TR_CKPT_CKPT_H' \
    'engine/ckpt/ckpt.h: include guard TR_CKPT_CKPT_H, expected TWINRUN_ENGINE_CKPT_CKPT_H'
exit $fail
