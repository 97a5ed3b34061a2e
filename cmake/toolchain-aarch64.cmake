# Cross build for aarch64 (ARM64) Linux with Debian's cross toolchain and arm64 multiarch
# libraries (scripts/setup installs both; scripts/test-aarch64 uses this file):
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake \
#         -DATTO_NATIVE=OFF -DATTO_MPI=OFF -DATTO_BUILD_BENCH=OFF
# Tests run under qemu-aarch64 (user-mode emulation): CMake prefixes the test executables with
# CMAKE_CROSSCOMPILING_EMULATOR, for gtest_discover_tests and ctest alike.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(ATTO_CROSS_TRIPLE aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${ATTO_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${ATTO_CROSS_TRIPLE}-g++)
# GCC notes that passing std::pair<double, double> changed ABI in GCC 10.1: every object here is
# built by one compiler, so the note is noise.
set(CMAKE_CXX_FLAGS_INIT -Wno-psabi)

# Libraries and headers: the cross toolchain's own (/usr/aarch64-linux-gnu) and Debian's arm64
# multiarch packages (/usr/lib/aarch64-linux-gnu, /usr/include/aarch64-linux-gnu); arch-all
# header-only packages (nlohmann-json, CLI11) and CMake package files come from /usr.
# /opt/atto-aarch64: arm64 packages that cannot be installed beside their amd64 twins (not
# Multi-Arch: same; scripts/setup unpacks them there): SentencePiece.
set(ATTO_AARCH64_EXTRA /opt/atto-aarch64 CACHE PATH "Unpacked arm64 packages (scripts/setup)")
set(CMAKE_FIND_ROOT_PATH ${ATTO_AARCH64_EXTRA} /usr/${ATTO_CROSS_TRIPLE} /usr)
set(CMAKE_LIBRARY_ARCHITECTURE ${ATTO_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(CMAKE_LIBRARY_PATH /usr/lib/${ATTO_CROSS_TRIPLE})
set(CMAKE_INCLUDE_PATH /usr/include/${ATTO_CROSS_TRIPLE})
# pkg-config (CMake's FindPkgConfig): the arm64 .pc files, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${ATTO_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig)

# The programs run on the arm64 multiarch runtime (libc6:arm64 and the libraries' packages:
# /lib/ld-linux-aarch64.so.1, /usr/lib/aarch64-linux-gnu), as on an arm64 Debian. Not with
# `-L /usr/aarch64-linux-gnu`: that takes the cross toolchain's loader (glibc 2.36-8cross1) while
# the loader's multiarch search still finds libc6:arm64's libc.so.6 (2.36-9+deb12u*), a pair
# that must match exactly; creating a thread then hung (every test with two threads).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
