# scripts/launch_llama3.sh: argument and environment handling with a mock train_llama3 and a mock
# nvidia-smi, then one real run of this build's train_llama3 through it.
add_test(NAME launch_script COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/launch/test_launch_script.sh
  ${PROJECT_BINARY_DIR}/bin/train_llama3 ${TWINRUN_BACKEND})
set_tests_properties(launch_script PROPERTIES LABELS "${labels}" TIMEOUT 120)

# launch_check over loopback: three torchrun-style ranks, and mpirun where it is installed. Each rank's
# exit status is waited for by its pid (a bare `wait` returns 0 whatever the ranks returned).
twinrun_expect_sh(launch_check_torchrun 0 "all 3 ranks reached the rendezvous at 127.0.0.1:29631"
  "pids=''; for r in 0 1 2; do RANK=$r WORLD_SIZE=3 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29631 ${PROJECT_BINARY_DIR}/bin/launch_check 20 & pids=\"$pids $!\"; done; rc=0; for p in $pids; do wait $p || rc=1; done; exit $rc"
  LABELS ${labels} PROPERTIES TIMEOUT 60)
# The heartbeat beside the rendezvous: two launch_check processes on it; SIGKILL of either, or SIGSTOP of
# one, makes the other name it and exit 1 within 10 s (the script measures it); a clean end exits 0.
twinrun_expect_sh(launch_heartbeat 0 "heartbeat: every case passed"
  "bash ${CMAKE_CURRENT_SOURCE_DIR}/launch/test_heartbeat.sh ${PROJECT_BINARY_DIR}/bin/launch_check 29651"
  LABELS ${labels} PROPERTIES TIMEOUT 120)
find_program(MPIRUN mpirun)
if(MPIRUN)
  # through sh: ci/memcheck.py runs each test's command under valgrind, and Open MPI's own start-up leaks
  twinrun_expect_sh(launch_check_mpirun 0 "all 2 ranks reached the rendezvous at 127.0.0.1:29632"
    "${MPIRUN} --oversubscribe -np 2 -x MASTER_PORT=29632 ${PROJECT_BINARY_DIR}/bin/launch_check 20"
    LABELS ${labels} PROPERTIES TIMEOUT 60)
  set_tests_properties(launch_check_mpirun PROPERTIES
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endif()

# The CUDA backend's collective code (cuda/coll_*.c, cuda/tools/coll_smoke.c) built against fakegpu, a CPU
# stand-in for CUDA and NCCL (tests/tools/fakegpu), and run: both modes' smoke test, the injected hang
# and its blame, then all of it under ThreadSanitizer. Here so that a CUDA runtime call the fake lacks
# fails a test, not only the next GPU run. Skipped, saying why, where gcc has no ThreadSanitizer (the
# script's last line, printed once its plain half passed). `slow`: ~90 s on 2 cores (little of it CPU time:
# the runs wait), the ThreadSanitizer half ~60 s of it. `gcc-plain`: not in the coverage build (its library
# links only with --coverage; the collective code the script compiles is not instrumented there).
if(NOT TWINRUN_COVERAGE)
  twinrun_expect_sh(fakegpu_collectives 0 "ok   build against fakegpu under ThreadSanitizer.*fakegpu check: 18 passed, 0 failed\n"
    "bash tests/tools/fakegpu/fakegpu_check.sh $<TARGET_FILE:twinrun_base>"
    LABELS ${labels} slow gcc-plain PROPERTIES TIMEOUT 300 COST 90 WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    SKIP_REGULAR_EXPRESSION "fakegpu check: ThreadSanitizer half SKIPPED: ")
endif()

# ---- the seeds' entry points -----------------------------------------------------------------------
# scripts/train_llama3_70b_multi_nodes.sh (the 70B guide's `bash train_llama3_70b_multi_nodes.sh
# --dataset_dir DIR --data_format bf16`) and scripts/train_llama3_8b_dynamic.sh (the 8B tutorial's
# script: launch_llama3.sh under the tutorial's name), as users type them. Each test runs in a fresh
# training directory made by launch/launchers_fixture.sh: the guide's 128 x 8 hostfile, a --dataset_dir
# laid out as the guide says, stand-in nvidia-smi and mthreads-gmi first on PATH (listing MOCK_NV_GPUS
# and MOCK_MT_GPUS GPUs, none by default, so a GPU machine's own tools do not count), and stand-in
# cuda/musa builds under TWINRUN_BUILD_ROOT that say which build ran. Exit code and output are both
# checked; regular expressions use [(] for a literal parenthesis.
set(L70 "bash ${PROJECT_SOURCE_DIR}/scripts/train_llama3_70b_multi_nodes.sh")
set(L8 "bash ${PROJECT_SOURCE_DIR}/scripts/train_llama3_8b_dynamic.sh")
# the twin build, for the runs that train
set(TWIN_BIN "TRAIN_BIN=${PROJECT_BINARY_DIR}/bin/train_llama3")
# a Llama shrunk to a test's size, for the 70B script's `--` (the last value wins, as in Megatron)
set(TINY70 "--num-layers 8 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 8 --num-query-groups 8 --kv-channels 8 --seq-length 32 --max-position-embeddings 32")
# launchers_test(NAME CODE REGEX COMMAND [NODES]): COMMAND in the fixture's directory (NODES hostfile lines)
function(launchers_test name code regex cmd)
  set(nodes 128)
  if(ARGN)
    list(GET ARGN 0 nodes)
  endif()
  set(w ${CMAKE_CURRENT_BINARY_DIR}/launchers/${name})
  twinrun_expect_sh(${name} ${code} "${regex}"
    "sh ${CMAKE_CURRENT_SOURCE_DIR}/launch/launchers_fixture.sh ${w} ${PROJECT_SOURCE_DIR} ${nodes} && cd ${w} && unset TWINRUN_BACKEND TRAIN_BIN DRY_RUN CUDA_VISIBLE_DEVICES MTHREADS_VISIBLE_DEVICES MUSA_VISIBLE_DEVICES WORLD_SIZE RANK MASTER_ADDR MASTER_PORT && export PATH=${w}/bin:$PATH TWINRUN_BUILD_ROOT=${w}/builds && ${cmd}"
    LABELS ${labels} PROPERTIES TIMEOUT 300)
endfunction()

# 70B: the guide's checks of the entry point. No --dataset_dir: the parameters, exit 0, nothing started.
launchers_test(launch_seed70_no_dataset_dir 0
  "--data_format +bf16.*--hostfile +[.]/hostfile.*TP=8, PP=8, CP=1.*未指定 --dataset_dir: 只打印参数, 没有启动训练"
  "${L70} && test ! -e ran")
launchers_test(launch_seed70_help 0
  "用法 [(]usage[)]: train_llama3_70b_multi_nodes.sh --dataset_dir DIR.*--data_format bf16[|]fp8.*--load DIR.*--hostfile FILE.*--backend auto[|]cuda[|]musa[|]twin.*--dry-run"
  "${L70} --help && test ! -e ran")
# ... and each misuse, named with the fix
launchers_test(launch_seed70_unknown_option 2
  "未知选项 [(]unknown option[)] '--epochs'; valid options: --dataset_dir, --data_format, --load, --save, --hostfile, --backend, --dry-run, --help"
  "${L70} --dataset_dir ds --epochs 3")
launchers_test(launch_seed70_missing_value 2
  "--dataset_dir 缺少取值 [(]needs a value; '--data_format' is an option, not a value"
  "${L70} --dataset_dir --data_format bf16")
launchers_test(launch_seed70_missing_value_last 2 "--load 缺少取值 [(]needs a value; see --help[)]"
  "${L70} --dataset_dir ds --load")
launchers_test(launch_seed70_positional 2
  "unexpected argument '/data/shared/llama3-70b': this script takes options only [(]the data set is --dataset_dir DIR"
  "${L70} /data/shared/llama3-70b")
launchers_test(launch_seed70_bad_data_format 2 "--data_format 'fp16' 无效 [(]invalid[)]: use one of: bf16 fp8"
  "${L70} --dataset_dir ds --data_format fp16")
launchers_test(launch_seed70_missing_hostfile 2
  "找不到 hostfile '[.]/hostfile' [(]run in the training directory that holds [.]/hostfile, or pass --hostfile FILE[)]: a line is 'host slots=N'"
  "rm hostfile && ${L70} --dataset_dir ds --data_format bf16")
launchers_test(launch_seed70_hostfile_no_slots 2
  "hostfile [.]/hostfile line 3: 'train-node-001' has no slots=N: a line is 'host slots=N', e.g. 'train-node-000 slots=8'"
  "printf '# the job\\ntrain-node-000 slots=8\\ntrain-node-001\\n' >hostfile && ${L70} --dataset_dir ds --data_format bf16")
launchers_test(launch_seed70_hostfile_bad_slots 2 "hostfile [.]/hostfile line 2: slots=eight is not a positive integer"
  "printf 'train-node-000 slots=8\\ntrain-node-001 slots=eight\\n' >hostfile && ${L70} --dataset_dir ds --data_format bf16")
launchers_test(launch_seed70_hostfile_twice 2 "'train-node-000' is listed twice [(]lines 1 and 2[)]"
  "printf 'train-node-000 slots=8\\ntrain-node-000 slots=8\\n' >hostfile && ${L70} --dataset_dir ds --data_format bf16")
launchers_test(launch_seed70_world_size 2
  "WORLD_SIZE=16 [(]the slots of [.]/hostfile, 2 nodes[)] is not a multiple of TP×PP×CP = 8×8×1 = 64: WORLD_SIZE = TP × PP × CP × DP"
  "${L70} --dataset_dir ds --data_format bf16" 2)
launchers_test(launch_seed70_missing_data 2
  "数据文件缺失或为空 [(]missing or empty[)]: ds/dataset/dedup-md5-pile-pile-cc_text_document[.]idx"
  "rm ds/dataset/*.idx && ${L70} --dataset_dir ds --data_format bf16")
launchers_test(launch_seed70_missing_tokenizer 2 "找不到 Tokenizer: ds/tokenizer/tokenizer[.]json"
  "rm ds/tokenizer/tokenizer.json && ${L70} --dataset_dir ds --data_format bf16")
launchers_test(launch_seed70_load_missing 2
  "--load ds/checkpoints/iter_0000004 does not exist: nothing to resume from"
  "${L70} --dataset_dir ds --load ds/checkpoints/iter_0000004")
# no GPU and no twin asked for: an error naming the flag, never the twin in silence
launchers_test(launch_seed70_no_gpu 2
  "没有找到 GPU [(]no GPU found on this node: nvidia-smi lists 0; mthreads-gmi lists 0[)][.] To rehearse on the CPU twin, ask for it: --backend twin [(]or TWINRUN_BACKEND=twin[)]"
  "${L70} --dataset_dir ds --data_format bf16")

# The guide's command as written, on an MTT S5000 node (mthreads-gmi lists 8): the MUSA build, one
# mpirun over the 128 nodes by slot, TP8 PP8 DP16, a log per rank. --dry-run starts nothing.
launchers_test(launch_seed70_dry_run_musa 0
  "WORLD_SIZE=1024 = TP 8 × PP 8 × CP 1 × DP 16, Global batch 128.*后端: musa [(][^ ]*/builds/musa/bin/train_llama3; nvidia-smi lists 0; mthreads-gmi lists 8[)], 主节点: train-node-000:29500.*mpirun --hostfile [.]/hostfile -np 1024 --map-by slot --bind-to none .*-x MASTER_ADDR -x MASTER_PORT -x TWINRUN_STORE_TOKEN .*rank_log[.]sh ds/logs [^ ]*/builds/musa/bin/train_llama3 --num-layers 80 --hidden-size 8192 .*--tensor-model-parallel-size 8 --pipeline-model-parallel-size 8 --context-parallel-size 1 --sequence-parallel --use-distributed-optimizer .*--data-path ds/dataset/dedup-md5-pile-pile-cc_text_document --tokenizer-type HuggingFaceTokenizer --tokenizer-model ds/tokenizer .*--save ds/checkpoints .*node 0 train-node-000 [(]slots=8[)]: ranks 0-7, LOCAL_RANK 0-7, pipeline stages 0-0, logs ds/logs/rank_00000[.]log .*node 127 train-node-127 [(]slots=8[)]: ranks 1016-1023, LOCAL_RANK 0-7, pipeline stages 7-7"
  "MOCK_MT_GPUS=8 ${L70} --dataset_dir ds --data_format bf16 --dry-run && test ! -e ran")
# fp8 on an NVIDIA node: the CUDA build, the FP8 flags; the guide's resume (--load .../iter_N) must exit
# on a missing checkpoint instead of starting afresh
launchers_test(launch_seed70_dry_run_cuda_fp8_load 0
  "后端: cuda [(][^ ]*/builds/cuda/bin/train_llama3; nvidia-smi lists 8.*--bf16 .*--fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max .*--load ds/checkpoints/iter_0000004 --exit-on-missing-checkpoint"
  "mkdir -p ds/checkpoints/iter_0000004 && MOCK_NV_GPUS=8 DRY_RUN=1 ${L70} --dataset_dir ds --data_format fp8 --load ds/checkpoints/iter_0000004 && test ! -e ran")
# a node whose hostfile line promises more GPUs than it has
launchers_test(launch_seed70_slots_over_gpus 2
  "[.]/hostfile gives this node [(]localhost[)] slots=8 but it has 4 musa GPUs [(]nvidia-smi lists 0; mthreads-gmi lists 4[)]: slots must be the node's GPU count"
  "echo 'localhost slots=8' >hostfile && TP_SIZE=1 PP_SIZE=1 MOCK_MT_GPUS=4 ${L70} --dataset_dir ds --data_format bf16")
# the twin, asked for: the whole 1024-rank job as one process, shown by --dry-run
launchers_test(launch_seed70_dry_run_twin 0
  "后端: twin .*twin: one process on this machine runs all 1024 ranks [(]log ds/logs/twin[.]log[)]:.env WORLD_SIZE=1024 [^ ]*train_llama3 --num-layers 80 .*node 127 train-node-127 [(]slots=8[)]: ranks 1016-1023"
  "${TWIN_BIN} TWINRUN_BACKEND=twin DRY_RUN=1 ${L70} --dataset_dir ds --data_format bf16 && test ! -e ran")
if(MPIRUN) # found above, for launch_check_mpirun
  # Real mpirun over a one-node hostfile (2 slots, TP1 PP1) with the stand-in MUSA build: the rank
  # variables, a log per rank, the last rank on the console; then a failing rank's exit code comes back.
  launchers_test(launch_seed70_mpirun 0
    "mock musa train_llama3: rank 1 local 1 master localhost:29500 token set args --num-layers 80 .*训练成功完成!.*rank0: mock musa train_llama3: rank 0 local 0 master localhost:29500 token set"
    "echo 'localhost slots=2' >hostfile && TP_SIZE=1 PP_SIZE=1 MOCK_MT_GPUS=2 ${L70} --dataset_dir ds --data_format bf16 && printf 'rank0: ' && cat ds/logs/rank_00000.log")
  launchers_test(launch_seed70_mpirun_failure 7 "训练失败，退出码: 7.*查看每个 rank 的日志: ds/logs/rank_[*][.]log"
    "echo 'localhost slots=2' >hostfile && TP_SIZE=1 PP_SIZE=1 MOCK_MT_GPUS=2 MOCK_FAIL_RANK=1 MOCK_FAIL_CODE=7 ${L70} --dataset_dir ds --data_format bf16")
endif()
if(TWINRUN_BACKEND STREQUAL "twin")
  # The guide's command as written, trained on the twin: 8 nodes x 8 slots at the guide's TP8 PP8 (64
  # ranks), a tiny Llama after `--`, a 5-iteration job stopped after iteration 4 (--exit-interval, as a
  # job that lost its nodes there) on the fixture's data and tokenizer; then the guide's resume as
  # written, --load .../checkpoints/iter_0000004, for the fifth (the same schedule: nothing to override).
  # Passed, it removes its checkpoints (the test tree must fit a CI runner's disk: ci/test.sh checks it).
  launchers_test(launch_seed70_twin_run 0
    "WORLD_SIZE=64 = TP 8 × PP 8 × CP 1 × DP 1.*iteration +4/ +5 [|].*saved checkpoint at iteration 4 to ds/checkpoints.*训练成功完成!.*loaded checkpoint from .* at iteration 4.*iteration +5/ +5 [|].*训练成功完成!"
    "export ${TWIN_BIN} TWINRUN_BACKEND=twin VOCAB_SIZE=32000 SAVE_INTERVAL=4 EVAL_INTERVAL=4 EVAL_ITERS=1 TRAIN_ITERS=5 && ${L70} --dataset_dir ds --data_format bf16 -- ${TINY70} --exit-interval 4 && ${L70} --dataset_dir ds --data_format bf16 --load ds/checkpoints/iter_0000004 -- ${TINY70} && rm -rf ds/checkpoints"
    8)
  # lab/gpu_seeds.sh (both seeds' commands and the doctor on one GPU node with the real build) as its dry run
  # on this build: the 70B guide's command in bf16 and fp8, each stopped at iteration 4 and resumed with
  # --load .../iter_0000004, the 8B tutorial's quick test, the doctor's JSON and JUnit; so that the
  # script a GPU node runs is the one CI keeps working. Passed, it removes its work folder (as above).
  twinrun_expect_sh(launch_gpu_seeds_dry_run 0 "ok +70B guide's command, --data_format bf16.*ok +70B guide's command, --data_format fp8.*ok +8B tutorial's single-node quick test.*ok +doctor over the node.*gpu_seeds: every step passed"
    "cd ${PROJECT_SOURCE_DIR} && TWINRUN_SEEDS_BACKEND=twin TWINRUN_SEEDS_BIN_DIR=${PROJECT_BINARY_DIR}/bin lab/gpu_seeds.sh ${CMAKE_CURRENT_BINARY_DIR}/gpu_seeds_dry && rm -rf ${CMAKE_CURRENT_BINARY_DIR}/gpu_seeds_dry/work"
    LABELS ${labels} valgrind-skip PROPERTIES TIMEOUT 300)
endif()

# 8B: the tutorial's script keeps its four positional paths; options are parsed, never read as paths.
launchers_test(launch_seed8_help 0
  "用法 [(]usage[)]: launch_llama3.sh [[]OPTIONS[]] [[]CHECKPOINT_PATH .*--backend auto[|]cuda[|]musa[|]twin.*--dry-run"
  "${L8} --help && test ! -e ran")
launchers_test(launch_seed8_unknown_option 2
  "未知选项 [(]unknown option[)] '--epochs'; valid options: --backend, --dry-run, --help, --"
  "${L8} checkpoints/x --epochs 3")
launchers_test(launch_seed8_70b_option 2
  "未知选项 [(]unknown option[)] '--dataset_dir': it is the 70B guide's; that entry point is scripts/train_llama3_70b_multi_nodes[.]sh"
  "${L8} --dataset_dir /data/shared/llama3-70b --data_format bf16")
launchers_test(launch_seed8_missing_value 2 "--backend 缺少取值 [(]needs a value; see --help[)]" "${L8} --backend")
launchers_test(launch_seed8_bad_backend 2 "--backend [(]TWINRUN_BACKEND[)] 'rocm' 无效 [(]invalid[)]: use one of: auto cuda musa twin"
  "${L8} --backend rocm")
launchers_test(launch_seed8_too_many 2 "too many arguments [(]5[)]: at most CHECKPOINT_PATH TENSORBOARD_LOGS_PATH TOKENIZER_ARG DATA_ARG"
  "${L8} a b c d e")
launchers_test(launch_seed8_positional_paths 0
  "检查点路径: ck.*TensorBoard 路径: tb.*--save ck --load ck --tensorboard-dir tb"
  "MOCK_NV_GPUS=1 ${L8} --dry-run ck tb && test ! -e ran")
# The backend from the node's GPUs. No GPU and no twin asked for: the error names the flag.
launchers_test(launch_seed8_no_gpu 2
  "没有找到 GPU [(]no GPU found on this node: nvidia-smi lists 0; mthreads-gmi lists 0[)][.] To rehearse on the CPU twin, ask for it: --backend twin [(]or TWINRUN_BACKEND=twin[)]"
  "${L8}")
# An MTT S5000 node: mthreads-gmi's GPUs, the MUSA build; MTHREADS_VISIBLE_DEVICES narrows them, or hides all
launchers_test(launch_seed8_musa_node 0
  "GPU 配置: 8 GPUs/节点 × 1 节点 = 8 总GPU.*后端: musa [(][^ ]*/builds/musa/bin/train_llama3[)].*rank process 7: RANK=7 WORLD_SIZE=8 LOCAL_RANK=7"
  "MOCK_MT_GPUS=8 ${L8} --dry-run && test ! -e ran")
launchers_test(launch_seed8_musa_visible 0 "GPU 配置: 4 GPUs/节点 × 1 节点 = 4 总GPU.*后端: musa"
  "MOCK_MT_GPUS=8 MTHREADS_VISIBLE_DEVICES=0,1,2,3 ${L8} --dry-run")
launchers_test(launch_seed8_musa_hidden 2
  "没有找到 GPU [(]no GPU found on this node: nvidia-smi lists 0; mthreads-gmi lists 0 within MTHREADS_VISIBLE_DEVICES='none'[)]"
  "MOCK_MT_GPUS=8 MTHREADS_VISIBLE_DEVICES=none ${L8} --dry-run")
# An NVIDIA node: nvidia-smi's GPUs within CUDA_VISIBLE_DEVICES, the CUDA build
launchers_test(launch_seed8_nvidia_node 0
  "GPU 配置: 2 GPUs/节点 × 1 节点 = 2 总GPU.*后端: cuda [(][^ ]*/builds/cuda/bin/train_llama3[)]"
  "MOCK_NV_GPUS=4 CUDA_VISIBLE_DEVICES=2,3 ${L8} --dry-run")
launchers_test(launch_seed8_both_vendors 2
  "this node has both NVIDIA and Moore Threads GPUs .*: choose one with --backend cuda or --backend musa"
  "MOCK_NV_GPUS=2 MOCK_MT_GPUS=2 ${L8} --dry-run")
launchers_test(launch_seed8_musa_without_gpu 2
  "这个节点没有 musa GPU [(]no GPU on this node: nvidia-smi lists 2; mthreads-gmi lists 0[)]: to rehearse on the CPU twin use --backend twin"
  "MOCK_NV_GPUS=2 ${L8} --backend musa --dry-run")
# The tutorial's multi-node template as written, on node 1 of 2 (4 GPUs each): ranks 4..7
launchers_test(launch_seed8_multinode_dry_run 0
  "平台注入变量: WORLD_SIZE=2 [(]节点数[)], RANK=1 [(]节点编号[)].*并行配置: TP=2, CP=2, PP=2.*--save [.]/experiments/llama3-8b-multinode/checkpoints.*rank process 3: RANK=7 WORLD_SIZE=8 LOCAL_RANK=3 LOCAL_WORLD_SIZE=4 MASTER_ADDR=worker-0 MASTER_PORT=29500"
  "export TP_SIZE=2 && export CP_SIZE=2 && export PP_SIZE=2 && export MICRO_BATCH_SIZE=1 && export GLOBAL_BATCH_SIZE=512 && export DTYPE=bf16 && export EXP_NAME=llama3-8b-multinode && export USE_EXP_STRUCTURE=1 && WORLD_SIZE=2 RANK=1 MASTER_ADDR=worker-0 MASTER_PORT=29500 MOCK_NV_GPUS=4 DRY_RUN=1 ${L8} && test ! -e ran")
if(TWINRUN_BACKEND STREQUAL "twin")
  # The tutorial's single-node quick test as written (FAST_TEST_MODE: 1000 samples at a global batch of
  # 32), trained on the twin with the tutorial's own model knobs set small; passed, it removes its data
  # cache and checkpoints (as above)
  launchers_test(launch_seed8_twin_quick_test 0
    "启用快速测试模式.*后端: twin.*iteration +31/ +31 [|].*训练成功完成!"
    "export TP_SIZE=1 && export CP_SIZE=1 && export PP_SIZE=1 && export MICRO_BATCH_SIZE=1 && export GLOBAL_BATCH_SIZE=32 && export FAST_TEST_MODE=1 && export EXP_NAME=test-aistudio && ${TWIN_BIN} NUM_LAYERS=2 HIDDEN_SIZE=64 FFN_HIDDEN_SIZE=128 NUM_ATTENTION_HEADS=8 NUM_QUERY_GROUPS=2 KV_CHANNELS=8 SEQ_LENGTH=32 VOCAB_SIZE=512 EVAL_ITERS=1 ${L8} --backend twin && rm -rf benchmark_cache_* checkpoints")
endif()

# ---- doctor (docs/doctor.md) -------------------------------------------------------------------------
# On the twin: healthy at 16 and 64 ranks (exit 0, every check, nccl-tests' busbw formulas), each of the four
# faults it names alone at 64 ranks (exactly its check fails, naming its node and the fix), the hostfile's
# names and slots, and the refusals; the JSON and JUnit reports parsed and checked in each case.
if(TWINRUN_BACKEND STREQUAL "twin")
  foreach(case healthy version_skew short_node slow_link hidden_dir hostfile usage)
    twinrun_expect_sh(doctor_${case} 0 "doctor ${case}: every check passed"
      "python3 ${CMAKE_CURRENT_SOURCE_DIR}/launch/doctor_check.py ${PROJECT_BINARY_DIR}/bin/doctor ${CMAKE_CURRENT_BINARY_DIR}/doctor/${case} ${case}"
      LABELS ${labels} PROPERTIES TIMEOUT 120)
  endforeach()
endif()
