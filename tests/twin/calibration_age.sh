#!/usr/bin/env bash
# lab/calib/calibration_age.py on a repository of its own: the table's data folder names the commit its
# kernels were measured at; a change under cuda/ since makes the table older, a change in cuda/tools or
# cuda/README.md does not; a GPU without a table, a commit the history lacks, a GIT_DIR elsewhere and a tree
# without git history of its own are "cannot tell", each saying why in one line.
# Usage: calibration_age.sh REPO_ROOT WORK_DIR
set -euo pipefail
root=$1 work=$2
age() { python3 "$root/lab/calib/calibration_age.py" "$@"; }
rm -rf "$work" && mkdir -p "$work/r/sim/cost" "$work/r/cuda/tools" "$work/r/data"
cd "$work/r"
g() { git -c user.name=test -c user.email=test@invalid "$@" >/dev/null; }
g init -q .
echo 'const twin_calibration twin_calibration_h100 = { .source = "lab/fit_cost_model.py data", };' >sim/cost/calibration_h100.c
echo 'kernel v1' >cuda/kern.cu
echo 'tool v1' >cuda/tools/bench.c
g add -A && g commit -q -m one
printf '{"commit": "%s", "configs": []}\n' "$(git rev-parse --short HEAD)" >data/calibration.json
g add -A && g commit -q -m data
expect() { # what, pattern, command...
    local what=$1 pat=$2 out
    shift 2
    out=$("$@" 2>&1) || true
    if ! grep -Eq "$pat" <<<"$out"; then
        echo "FAIL $what: wanted /$pat/, got: $out"
        exit 1
    fi
    echo "ok $what"
}
expect current "is current \(fitted to data, measured at [0-9a-f]+" age "NVIDIA H100 80GB HBM3" --repo .
echo 'tool v2' >cuda/tools/bench.c
expect "tools do not count" "is current" age "NVIDIA H100 80GB HBM3" --repo .
echo 'kernel v2' >cuda/kern.cu
expect "a kernel changed (working tree)" "is older than the kernels: .*changed since: cuda/kern.cu\. Remake it" age "NVIDIA H100" --repo .
g commit -q -am two
expect "a kernel changed (committed)" '"status": "older", "changed": \["cuda/kern.cu"\]' age "NVIDIA H100" --repo . --json
expect "no table" "cannot tell .*no fitted table for 'Tesla V100'" age "Tesla V100" --repo .
sed -i 's/"commit": "[0-9a-f]*"/"commit": "abc1234-dirty"/' data/calibration.json
expect "a dirty measurement" "cannot tell .*measured at 'abc1234-dirty', not one commit" age "NVIDIA H100" --repo .
printf '{"commit": "abc1234", "configs": []}\n' >data/calibration.json
expect "a commit not in the history" "cannot tell .*git cannot compare with abc1234: fatal: .*abc1234" age "NVIDIA H100" --repo .
expect "GIT_DIR elsewhere" "cannot tell .*git cannot compare with abc1234: \. is not the top of a git work tree \(GIT_DIR=/nonexistent\)$" \
    env GIT_DIR=/nonexistent python3 "$root/lab/calib/calibration_age.py" "NVIDIA H100" --repo .
rm -rf .git
expect "no git" "cannot tell .*git cannot compare with abc1234: \. is not the top of a git work tree$" age "NVIDIA H100" --repo .
echo "calibration_age: ok"
