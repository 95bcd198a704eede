# sbx_add_test(NAME <target> LABEL unit|integration|e2e SOURCES … LIBS …)
# One GoogleTest executable; each TEST becomes a CTest test carrying the label.
#
# sbx_add_sbxd_test(NAME <target> LABEL … SOURCES … LIBS …)
# The same for a test of the built binaries through tests/support/sbxd_harness.h: links the
# harness, compiles in the paths of sbxd, sbxctl and sbx-emulator (SBXD_PATH, SBXCTL_PATH,
# SBX_EMULATOR_PATH) and builds them first.
include(GoogleTest)
#
# With POSTGRES, the tests share one throwaway PostgreSQL 15 per ctest run: the CTest fixture
# sbx_postgres (tests/support/CMakeLists.txt) starts it and they find it through
# SBX_TEST_POSTGRES_STATE (tests/support/postgres_server.h).
function(sbx_add_test)
  cmake_parse_arguments(T "POSTGRES" "NAME;LABEL" "SOURCES;LIBS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_include_directories(${T_NAME} PRIVATE ${SBX_ROOT})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock sbx_warnings)
  set(extra)
  if(T_POSTGRES)
    set(extra FIXTURES_REQUIRED sbx_postgres
              ENVIRONMENT "SBX_TEST_POSTGRES_STATE=${SBX_POSTGRES_STATE}")
  endif()
  gtest_discover_tests(${T_NAME}
    PROPERTIES LABELS ${T_LABEL} ${extra}
    DISCOVERY_TIMEOUT 60)
endfunction()

function(sbx_add_sbxd_test)
  cmake_parse_arguments(T "POSTGRES" "NAME;LABEL" "SOURCES;LIBS" ${ARGN})
  set(postgres)
  if(T_POSTGRES)
    set(postgres POSTGRES)
  endif()
  sbx_add_test(NAME ${T_NAME} LABEL ${T_LABEL} ${postgres} SOURCES ${T_SOURCES}
               LIBS sbx_test_harness ${T_LIBS})
  sbx_use_built_binaries(${T_NAME})
endfunction()

# Compiles the paths of the built sbxd, sbxctl and sbx-emulator into `target` and builds them
# before it.
function(sbx_use_built_binaries target)
  target_compile_definitions(${target} PRIVATE
    SBXD_PATH="$<TARGET_FILE:sbxd>"
    SBXCTL_PATH="$<TARGET_FILE:sbxctl>"
    SBX_EMULATOR_PATH="$<TARGET_FILE:sbx-emulator>")
  add_dependencies(${target} sbxd sbxctl sbx-emulator)
endfunction()
