# Cross-compiling for AArch64 Linux with the Debian cross toolchain (g++-aarch64-linux-gnu):
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-toolchain.cmake
# Tests then run under qemu-aarch64 (CMAKE_CROSSCOMPILING_EMULATOR). The full build also needs
# the arm64 versions of the project's libraries; scripts/arm-check.sh checks the kernels without
# them.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
find_program(TRELLIS_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(TRELLIS_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${TRELLIS_QEMU_AARCH64})
endif()
