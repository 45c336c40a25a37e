# Tools the tests and GPU checks use that belong to no one backend (docs/architecture.md):
#   kern_oracle.c  the twin's CPU kernels as the GPU kernels' oracle (a cuda build: both backends' kernels)
#   fakegpu/       a CPU stand-in for CUDA and NCCL, to run the CUDA backend's collective code (fakegpu_check.sh)
#   flash_emu/     the CUDA flash-attention kernels on the CPU, warps emulated (flash_emu.sh)
# The last two build themselves from their scripts (fakegpu_check.sh runs as the ctest test
# fakegpu_collectives, tests/launch/tests.cmake); kern_oracle is built here.

# kern_oracle: the twin's CPU kernels (sim/kern, every kern_X renamed twin_kern_X) as the oracle
# for the GPU kernels on large random inputs (see kern_oracle.c).
if(TWINRUN_BACKEND STREQUAL "cuda")
  file(GLOB _twin_kern_src CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/sim/kern/*.c)
  # every kernel of the one list, TR_KERNELS in twinrun/kern.h: X(kern_name, (parameters))
  file(READ ${PROJECT_SOURCE_DIR}/base/include/twinrun/kern.h _kern_h)
  string(REGEX MATCHALL "X\\(kern_[a-z0-9_]+," _kernel_entries "${_kern_h}")
  set(_twin_renames "")
  foreach(entry ${_kernel_entries})
    string(REGEX REPLACE "X\\((kern_[a-z0-9_]+)," "\\1" fn "${entry}")
    list(APPEND _twin_renames "${fn}=twin_${fn}")
  endforeach()
  list(LENGTH _twin_renames _nkernels)
  if(_nkernels LESS 2)
    message(FATAL_ERROR "kern_oracle: no X(kern_...) line in base/include/twinrun/kern.h's TR_KERNELS")
  endif()
  set_source_files_properties(${_twin_kern_src} PROPERTIES COMPILE_DEFINITIONS "${_twin_renames}")
  add_executable(kern_oracle ${CMAKE_CURRENT_LIST_DIR}/kern_oracle.c ${_twin_kern_src})
  # sim/ and sim/include for the twin kernels' own headers (kern_cpu.h includes twin_cost.h); the
  # oracle defines the cost hook itself.
  target_include_directories(kern_oracle PRIVATE ${PROJECT_SOURCE_DIR}/sim/kern ${PROJECT_SOURCE_DIR}/sim
                             ${PROJECT_SOURCE_DIR}/sim/include ${TWINRUN_EXPORTS}/twin)
  target_link_libraries(kern_oracle PRIVATE ${TWINRUN_LINK})
  set_target_properties(kern_oracle PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
  # Each cuDNN attention candidate alone (TWINRUN_CUDNN_CANDIDATE) on the context-parallel chunks and
  # their plain-causal pieces: one whose outputs are not the heuristics' first engine's is refused at
  # the choice (kern_attention_cudnn_check.cu) and another path serves the call, so each must pass.
  # The FP8 kernels' MUSA paths on an NVIDIA GPU: the software cast (TWINRUN_FP8_CAST=sw) and the
  # dequantising GEMM fallback (TWINRUN_GEMM=blas) against the twin (the default paths run in kern_oracle).
  add_test(NAME kern_oracle_fp8_fallback COMMAND kern_oracle --only fp8)
  set_tests_properties(kern_oracle_fp8_fallback PROPERTIES LABELS "tools;gpu"
                       ENVIRONMENT "TWINRUN_FP8_CAST=sw;TWINRUN_GEMM=blas")
  foreach(c atomic0 atomic1 det0 det1)
    add_test(NAME kern_oracle_cudnn_${c} COMMAND kern_oracle --only attention_pos)
    set_tests_properties(kern_oracle_cudnn_${c} PROPERTIES LABELS "tools;gpu"
                         ENVIRONMENT "TWINRUN_CUDNN_CANDIDATE=${c}")
  endforeach()
endif()

# fake_nvml: a stand-in libnvidia-ml.so.1 whose GPUs and readings come from the environment, for the
# doctor's health check (tests/unit/test_doctor_health.c opens it through TWINRUN_NVML_LIBRARY). Built in
# every preset: the probe it stands behind (base/nvml) is backend-neutral.
add_library(fake_nvml MODULE ${CMAKE_CURRENT_LIST_DIR}/fake_nvml/fake_nvml.c)
target_include_directories(fake_nvml PRIVATE ${PROJECT_SOURCE_DIR}/base)
