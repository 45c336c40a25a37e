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
