# Shared compile settings and a helper that declares one engine module as a static library.

add_library(trellis_options INTERFACE)
# No implicit fused multiply-add: scalar results must not change with the compiler's mood or the
# target ISA (reference kernels are compared bit for bit; explicit FMA intrinsics are unaffected).
target_compile_options(trellis_options INTERFACE -Wall -Wextra -Wpedantic -ffp-contract=off)
# g++ 12 reports impossible overlaps in inlined std::string concatenation at -O2 (GCC bug 105329,
# fixed in 13); the warning is noise there, and -Werror would turn it into a build failure.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(trellis_options INTERFACE -Wno-restrict)
endif()
if(TRELLIS_WERROR)
  target_compile_options(trellis_options INTERFACE -Werror)
endif()
if(TRELLIS_SANITIZE)
  target_compile_options(trellis_options INTERFACE
    -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_link_options(trellis_options INTERFACE -fsanitize=address,undefined)
endif()

if(TRELLIS_TSAN)
  target_compile_options(trellis_options INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  # ThreadSanitizer does not model atomic_thread_fence; Asio's handler fences then draw a
  # warning. The server runs its handlers on one I/O thread and hands work across threads through
  # Asio's mutex-guarded queue, so the fences can go in this build.
  target_compile_definitions(trellis_options INTERFACE BOOST_ASIO_DISABLE_FENCED_BLOCK)
  target_link_options(trellis_options INTERFACE -fsanitize=thread)
endif()
if(TRELLIS_BUILD_FUZZ)
  target_compile_options(trellis_options INTERFACE
    -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
  target_link_options(trellis_options INTERFACE -fsanitize=address,undefined)
endif()

# trellis_module(NAME SOURCES... [DEPS dep...] [PRIVATE_DEPS dep...])
# Creates the static library trellis_<NAME>; its headers are included as "NAME/file.h".
#
# Each module gets an include root of its own, ${CMAKE_BINARY_DIR}/include/NAME, that holds only a
# link NAME -> src/NAME. A target therefore sees the headers of the modules it links (DEPS are
# public, so their own DEPS come along) and no others: including a module that is not a declared
# dependency fails to compile, which keeps the layering of docs/ARCHITECTURE.md enforced by the
# build.
function(trellis_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(root ${CMAKE_BINARY_DIR}/include/${name})
  file(MAKE_DIRECTORY ${root})
  if(NOT EXISTS ${root}/${name})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${name} ${root}/${name} SYMBOLIC)
  endif()
  if(NOT ARG_SOURCES)  # a module with headers only so far
    add_library(trellis_${name} INTERFACE)
    target_include_directories(trellis_${name} INTERFACE ${root})
    target_link_libraries(trellis_${name} INTERFACE trellis_options ${ARG_DEPS})
    return()
  endif()
  add_library(trellis_${name} STATIC ${ARG_SOURCES})
  # Unity builds: a module's sources compile as a few translation units, so the standard and
  # third-party headers are parsed a few times instead of once per file (the first run builds
  # the CLI in about two thirds of the time). The kernels are not: their files carry per-file ISA
  # flags.
  if(TRELLIS_UNITY AND NOT name STREQUAL "kernels")
    set_target_properties(trellis_${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 16)
  endif()
  target_include_directories(trellis_${name} PUBLIC ${root})
  target_link_libraries(trellis_${name} PUBLIC trellis_options ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

# trellis_test(NAME SOURCES... DEPS dep...): one GoogleTest binary registered with CTest.
function(trellis_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE trellis_options ${ARG_DEPS} GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    TRELLIS_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    TRELLIS_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared")
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 600)
endfunction()
