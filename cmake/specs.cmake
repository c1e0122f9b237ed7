# specs.cmake: every spec/*_spec.lua runs under busted (on LuaJIT) as one CTest test.
# Specs tagged #gpu run as separate tests labelled "gpu"; without a GPU they report as not
# run (CTest's "Not Run"), never as passed.
find_program(LUAJIT_EXECUTABLE luajit REQUIRED)
find_program(BUSTED_EXECUTABLE busted REQUIRED)
set(TOCHA_LUA_PATH "${CMAKE_SOURCE_DIR}/lua/?.lua;${CMAKE_SOURCE_DIR}/lua/?/init.lua;${CMAKE_SOURCE_DIR}/bindings/?.lua;${CMAKE_BINARY_DIR}/lua/?.lua;${CMAKE_SOURCE_DIR}/spec/?.lua;;")
# CMake lists use ';' too: escape the path's separators so that ENVIRONMENT keeps them.
string(REPLACE ";" "\\;" TOCHA_LUA_PATH_ESCAPED "${TOCHA_LUA_PATH}")
# The specs' kernel cache; the sanitizer build shares the normal build's (the kernels the
# simulator loads are built by the host compiler either way).
set(TOCHA_TEST_CACHE_DIR "${CMAKE_BINARY_DIR}/kernel-cache" CACHE PATH "Kernel cache for the specs")
set(TOCHA_SPEC_ENV
  "LUA_PATH=${TOCHA_LUA_PATH_ESCAPED}"
  "TOCHA_CACHE_DIR=${TOCHA_TEST_CACHE_DIR}"
  "TOCHA_EXE=$<TARGET_FILE:tocha_cli>"
  "TOCHA_SOURCE_DIR=${CMAKE_SOURCE_DIR}")
if(TOCHA_SANITIZE)
  # busted runs under the system luajit, which is not instrumented: the sanitizer runtime
  # must come first in its process. Leaks are checked by the lifecycle test, run by the
  # instrumented tocha executable (luajit's own C modules leave unreachable blocks at exit).
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
                  OUTPUT_VARIABLE TOCHA_LIBASAN OUTPUT_STRIP_TRAILING_WHITESPACE)
  set(TOCHA_SANITIZER_ENV "LD_PRELOAD=${TOCHA_LIBASAN}"
    "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
  list(APPEND TOCHA_SPEC_ENV ${TOCHA_SANITIZER_ENV})
endif()
file(GLOB TOCHA_SPECS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/spec/*_spec.lua)
foreach(spec IN LISTS TOCHA_SPECS)
  get_filename_component(name ${spec} NAME_WE)
  add_test(NAME ${name}
    COMMAND ${LUAJIT_EXECUTABLE} ${BUSTED_EXECUTABLE} --exclude-tags=gpu --output=utfTerminal ${spec}
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT "${TOCHA_SPEC_ENV}" LABELS cpu)
  # A spec has GPU tests when it tags them itself or runs over ref.devices() (which tags cuda).
  file(STRINGS ${spec} gpu_tags REGEX "#gpu|ref\\.devices\\(\\)")
  if(gpu_tags)
    add_test(NAME ${name}_gpu
      COMMAND ${CMAKE_SOURCE_DIR}/scripts/run-gpu-spec.sh ${LUAJIT_EXECUTABLE} ${BUSTED_EXECUTABLE} ${spec}
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(${name}_gpu PROPERTIES ENVIRONMENT "${TOCHA_SPEC_ENV}" LABELS gpu
      SKIP_RETURN_CODE 77)
  endif()
endforeach()

# The install tree: `cmake --install` into a fresh prefix, then require "tocha" from the
# installed tocha and from plain luajit.
add_test(NAME install_check
  COMMAND ${CMAKE_SOURCE_DIR}/scripts/install-check.sh ${CMAKE_BINARY_DIR} ${LUAJIT_EXECUTABLE})
set_tests_properties(install_check PROPERTIES LABELS cpu
  ENVIRONMENT "TOCHA_CACHE_DIR=${TOCHA_TEST_CACHE_DIR};${TOCHA_SANITIZER_ENV}")

# Create, free and collect tensors and kernels 10,000 times: host memory and device memory
# return to where they started. In the sanitizer build this is also the LeakSanitizer check:
# the instrumented tocha executable runs it with leak detection on, so anything of tocha's
# still allocated at exit is reported. (The busted specs run under the system luajit with
# leak detection off: busted's own C modules and the compilers tocha starts would be
# reported there, none of them tocha's; see docs/reliability.md.)
add_test(NAME lifecycle_check COMMAND $<TARGET_FILE:tocha_cli> ${CMAKE_SOURCE_DIR}/spec/lifecycle.lua
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(lifecycle_check PROPERTIES LABELS cpu
  ENVIRONMENT "TOCHA_CACHE_DIR=${TOCHA_TEST_CACHE_DIR};TOCHA_DEVICE=sim")
if(TOCHA_SANITIZE)
  # The executable links the sanitizer runtime itself (no preload, so the compilers it starts
  # are not instrumented). ASan holds freed memory in quarantine (256 MB by default), which
  # the resident-memory check would read as growth.
  set_property(TEST lifecycle_check APPEND PROPERTY ENVIRONMENT
    "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:quarantine_size_mb=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
endif()
