#!/usr/bin/env bash
# The architecture check (ci/check_boundaries.py) passes on the tree and fails on each kind of
# violation planted in a copy of it: one per rule of the layers (base uses nothing; a backend uses base
# only, never the other backend, the engine or the runner; fault uses base only; the engine no backend
# and no runner), a header a library does not export to that consumer, an export to a library that may
# not use it, a reach into the engine's internals, an include loop between folders, an include guard of
# another style, and the naming rule (a prefix that names another folder, none, or the seam's).
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
    cp -r "$src/base" "$src/cuda" "$src/engine" "$src/sim" "$src/runner" "$src/fault" "$dir/"
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
plant base_to_engine base/flight/flight_blame.c '#include "../../engine/include/twinrun/config.h"' \
    'base includes engine/include/twinrun/config.h (engine): not allowed (base may use nothing else'
plant twin_to_engine sim/sched/sched_run.c '#include "../../engine/ckpt/ckpt.h"' \
    'twin includes engine/ckpt/ckpt.h (engine): not allowed (twin may use base'
plant twin_to_cuda sim/dev/dev_sim.c '#include "../../cuda/cuda_dev.h"' \
    'twin includes cuda/cuda_dev.h (cuda): not allowed'
plant cuda_to_engine cuda/coll_nccl.c '#include "../engine/include/twinrun/config.h"' \
    'cuda includes engine/include/twinrun/config.h (engine): not allowed'
plant fault_to_engine fault/fault_rank.c '#include "../engine/ckpt/ckpt.h"' \
    'fault includes engine/ckpt/ckpt.h (engine): not allowed (fault may use base'
plant engine_to_runner engine/train/trainer.c '#include "../../runner/include/runner/report.h"' \
    'engine includes runner/include/runner/report.h (runner): not allowed'
plant base_not_exported_to_twin sim/sched/sched_run.c '#include "../../base/core/safe_file.h"' \
    'twin includes base/core/safe_file.h, which base does not export to twin'
plant fault_exported_to_a_backend fault/EXPORTS 'fault/fault.h           engine runner=>fault/fault.h           engine runner twin' \
    'exports fault/fault.h to twin, which may not use fault'
plant engine_exported_to_a_backend engine/EXPORTS 'train/trainer.h         runner=>train/trainer.h         runner cuda' \
    'exports train/trainer.h to cuda, which may not use engine'
plant name_of_another_folder engine/io/tb_event.c 'int train_tb_stray(void) { return 0; }' \
    'train_tb_stray: the prefix train_ names engine/train, not engine/io'
plant name_of_no_folder runner/work_dir.c 'int sc_work_stray(void) { return 0; }' \
    'sc_work_stray: the prefix sc_ names no folder'
plant name_of_the_seam cuda/launch_cuda.c 'int coll_stray(void) { return 0; }' \
    'coll_stray: the prefix coll_ is the seam'"'"'s, but base/include/twinrun/coll.h does not declare coll_stray'
plant engine_to_twin engine/train/trainer.c '#include "../../sim/include/twin.h"' \
    'engine includes sim/include/twin.h (twin): not allowed'
plant twin_to_runner sim/sched/sched_run.c '#include "../../runner/include/runner/report.h"' \
    'twin includes runner/include/runner/report.h (runner): not allowed'
plant cuda_to_twin cuda/coll_nccl.c '#include "../sim/sched/sched_internal.h"' \
    'cuda includes sim/sched/sched_internal.h (twin): not allowed'
plant runner_to_engine_internals runner/runner_job.c '#include "model/llama.h"' \
    '"model/llama.h" is not a header runner can see'
plant dotdot sim/coll/coll_api.c '#include "../sched/sched_internal.h"' 'no "../" in includes'
plant folder_loop sim/sched/sched_state.c '#include "coll/coll_internal.h"' \
    'include loop between folders: sim/coll <-> sim/sched'
plant guard engine/ckpt/ckpt.h 'TWINRUN_ENGINE_CKPT_CKPT_H=>TR_CKPT_CKPT_H' \
    'engine/ckpt/ckpt.h: include guard TR_CKPT_CKPT_H, expected TWINRUN_ENGINE_CKPT_CKPT_H'
exit $fail
