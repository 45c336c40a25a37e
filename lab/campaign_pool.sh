#!/usr/bin/env bash
# Slices of the thousand-card fault campaign (lab/campaign_1024.sh) run side by side on a machine with
# many cores, until a deadline: JOBS slices at a time, each a one-thread twin (TWINRUN_TWIN_THREADS=1),
# each given the time left; a slice cut off by the deadline leaves no report and does not count (its
# seed is simply not done: rerun it later). Reports and logs go to OUT (slice_K.json, slice_K.log);
# work folders to CAMPAIGN_WORK (default a temporary folder), removed as slices end. Ends with
# lab/campaign_summary.py over every report in OUT.
#   lab/campaign_pool.sh OUT FIRST LAST [PER=5] [JOBS=nproc] [SECONDS=3600] [BASE_SEED=1000]
# The 1000-fault campaign as 200 slices of 5 (seeds 1000..1199):
#   lab/campaign_pool.sh OUT 0 199 5
set -uo pipefail
cd "$(dirname "$0")/.."
out=$1 first=$2 last=$3 per=${4:-5} jobs=${5:-$(nproc)} secs=${6:-3600} base=${7:-1000}
bin=${SCENARIO_BIN:-build/twin/bin/scenario}
[ -x "$bin" ] || { echo "campaign_pool: $bin missing: build the twin first (make build)" >&2; exit 2; }
work=${CAMPAIGN_WORK:-}
if [ -z "$work" ]; then work=$(mktemp -d) && trap 'rm -rf "$work"' EXIT; fi
mkdir -p "$out" "$work"
end=$(($(date +%s) + secs))
export TWINRUN_TWIN_THREADS=1 SCENARIO_BIN="$bin"
started=0 skipped=0
for ((k = first; k <= last; k++)); do
    [ -f "$out/slice_$k.json" ] && continue # done by an earlier run
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
    left=$((end - $(date +%s)))
    if [ $left -le 10 ]; then skipped=$((skipped + last - k + 1)); break; fi
    (
        t0=$(date +%s)
        CAMPAIGN_WORK="$work" timeout -k 5 $left bash lab/campaign_1024.sh "$out" $k $k "$per" "$base" \
            >"$out/slice_$k.log" 2>&1
        rc=$?
        [ $rc -ne 0 ] && [ $rc -ne 1 ] && rm -f "$out/slice_$k.json" # cut off: no report
        rm -rf "$work/work_$k"
        echo "slice $k: exit $rc after $(($(date +%s) - t0)) s"
    ) &
    started=$((started + 1))
done
wait
echo "campaign_pool: $started slices started, $skipped not started (deadline)"
shopt -s nullglob
reports=("$out"/slice_*.json)
[ ${#reports[@]} -gt 0 ] || { echo "campaign_pool: no slice finished"; exit 1; }
python3 lab/campaign_summary.py "${reports[@]}"
