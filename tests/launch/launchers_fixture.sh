#!/bin/sh
# A training directory for the launcher tests (tests/launch/tests.cmake, launch_seed70_* and
# launch_seed8_*), made fresh in WORK:
#   WORK/hostfile       the 70B guide's hostfile (§2.2): NODES lines "train-node-NNN slots=8" (default 128)
#   WORK/ds             a --dataset_dir as the guide lays it out (§2.1, §3.2): dataset/
#                       dedup-md5-pile-pile-cc_text_document.{bin,idx} (a Megatron-written corpus,
#                       vocabulary 32000) and tokenizer/ (a Hugging Face tokenizer of that vocabulary)
#   WORK/bin            stand-ins put first on PATH: nvidia-smi --list-gpus and mthreads-gmi -L list
#                       MOCK_NV_GPUS and MOCK_MT_GPUS GPUs (none by default, whatever the machine has)
#   WORK/builds         TWINRUN_BUILD_ROOT stand-in: {cuda,musa}/bin/train_llama3 say which build ran,
#                       their rank and arguments, touch WORK/ran, and exit MOCK_FAIL_CODE on rank
#                       MOCK_FAIL_RANK
# Usage: launchers_fixture.sh WORK SOURCE_DIR [NODES]
set -eu
w=$1 src=$2 nodes=${3:-128}
rm -rf "$w"
mkdir -p "$w/bin" "$w/ds/dataset" "$w/builds/cuda/bin" "$w/builds/musa/bin"
cp "$src/tests/data/megatron_data/gpt_u16_seq64/corpus.bin" "$w/ds/dataset/dedup-md5-pile-pile-cc_text_document.bin"
cp "$src/tests/data/megatron_data/gpt_u16_seq64/corpus.idx" "$w/ds/dataset/dedup-md5-pile-pile-cc_text_document.idx"
# the tokenizer is made once for all the tests (python3's start costs seconds on a loaded machine): into
# a folder of its own, renamed into place, so that tests running at once never see half of it
cache=$(dirname "$w")/tokenizer32000
if [ ! -f "$cache/tokenizer.json" ]; then
    python3 "$src/tests/common/synth_tokenizer.py" "$cache.$$" 32000 >/dev/null
    mv -T "$cache.$$" "$cache" 2>/dev/null || rm -rf "$cache.$$"
fi
cp -r "$cache" "$w/ds/tokenizer"
i=0
while [ "$i" -lt "$nodes" ]; do
    printf 'train-node-%03d slots=8\n' "$i"
    i=$((i + 1))
done >"$w/hostfile"

# nvidia-smi's and mthreads-gmi's listing formats ("GPU 0: name (UUID: ...)", "GPU 0 : name (UUID : ...)")
cat >"$w/bin/nvidia-smi" <<'SH'
#!/bin/sh
[ "${1:-}" = --list-gpus ] || [ "${1:-}" = -L ] || exit 0
i=0; while [ "$i" -lt "${MOCK_NV_GPUS:-0}" ]; do echo "GPU $i: NVIDIA H100 (UUID: GPU-nv-$i)"; i=$((i + 1)); done
SH
cat >"$w/bin/mthreads-gmi" <<'SH'
#!/bin/sh
[ "${1:-}" = -L ] || exit 0
i=0; while [ "$i" -lt "${MOCK_MT_GPUS:-0}" ]; do echo "GPU $i : MTT S5000 (UUID : GPU-mt-$i)"; i=$((i + 1)); done
SH
for b in cuda musa; do
    cat >"$w/builds/$b/bin/train_llama3" <<SH
#!/bin/sh
r=\${OMPI_COMM_WORLD_RANK:-\${RANK:-?}}
echo "mock $b train_llama3: rank \$r local \${OMPI_COMM_WORLD_LOCAL_RANK:-\${LOCAL_RANK:-?}} master \${MASTER_ADDR:-}:\${MASTER_PORT:-} token \${TWINRUN_STORE_TOKEN:+set} args \$*"
touch "$w/ran"
[ "\$r" = "\${MOCK_FAIL_RANK:-x}" ] && exit "\${MOCK_FAIL_CODE:-1}"
exit 0
SH
done
chmod +x "$w/bin/"* "$w/builds/cuda/bin/train_llama3" "$w/builds/musa/bin/train_llama3"
