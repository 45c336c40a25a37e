# tests/ckpt: checkpoint library and tools. Included by tests/CMakeLists.txt once per folder,
# after the test_*.c programs exist.
#
# engine/ckpt checksums with zlib's crc32 (Debian zlib1g-dev). Until the top-level CMakeLists links
# zlib into twinrun_engine, the programs that use engine/ckpt get it here.
find_package(ZLIB REQUIRED)
foreach(t test_ckpt_save test_ckpt_reshard test_ckpt_corrupt test_ckpt_manifest test_ckpt_hf ckpt)
  if(TARGET ${t})
    target_link_libraries(${t} PRIVATE ZLIB::ZLIB)
  endif()
endforeach()
