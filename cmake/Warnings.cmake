# Warnings live on one INTERFACE target that every sbx target links PRIVATE.
add_library(sbx_warnings INTERFACE)
target_compile_options(sbx_warnings INTERFACE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
if(SBX_WERROR)
  target_compile_options(sbx_warnings INTERFACE -Werror)
endif()
