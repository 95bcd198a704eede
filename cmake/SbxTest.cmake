# sbx_add_test(NAME <target> LABEL unit|integration|e2e SOURCES … LIBS …)
# One GoogleTest executable; each TEST becomes a CTest test carrying the label.
include(GoogleTest)
function(sbx_add_test)
  cmake_parse_arguments(T "" "NAME;LABEL" "SOURCES;LIBS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_include_directories(${T_NAME} PRIVATE ${SBX_ROOT})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock sbx_warnings)
  gtest_discover_tests(${T_NAME}
    PROPERTIES LABELS ${T_LABEL}
    DISCOVERY_TIMEOUT 60)
endfunction()
