"""Builds the atto Python package: the extension atto._core (pybind11, python/src/atto_core.cpp)
over libatto.so, atto's C API.

    pip install --no-build-isolation ./python                               # (a) builds libatto too
    ATTO_BUILD_DIR=build pip install --no-build-isolation ./python          # (b) links build/libatto.so

(a) Without ATTO_BUILD_DIR, libatto.so is built with CMake from this repository (python/..) in
    python/build/temp.*/libatto (the shared library only: no tests, no benchmarks, no MPI; extra CMake
    arguments in $ATTO_CMAKE_ARGS, e.g. "-DATTO_PORTABLE=ON"; $CMAKE_BUILD_PARALLEL_LEVEL jobs)
    and copied into the package: the installed package needs nothing from the build tree.
(b) With ATTO_BUILD_DIR set, the extension links that build folder's libatto.so (configured and
    built with CMake: `cmake --build DIR --target atto_shared`) and finds it there at run time
    (rpath): rebuilding libatto there is seen by the package without reinstalling it. The
    package's own build files go to DIR/python-build, not into the source tree.

No network: Debian's setuptools, wheel and pybind11-dev (or a pybind11 Python package) suffice;
numpy is needed at run time.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
SOURCE = HERE.parent  # the atto repository
INCLUDE = SOURCE / "include"
BUILD_DIR = os.environ.get("ATTO_BUILD_DIR")


def atto_version():
    text = (INCLUDE / "atto" / "atto.h").read_text()
    parts = [re.search(rf"#define ATTO_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def pybind11_include():
    try:
        import pybind11  # a pip-installed pybind11, when there is one

        return [pybind11.get_include()]
    except ImportError:
        if Path("/usr/include/pybind11/pybind11.h").exists():  # Debian's pybind11-dev
            return []
        sys.exit("setup.py: pybind11 not found: install Debian's pybind11-dev (scripts/setup) or pybind11")


def shared_lib_in(folder):
    """libatto.so in a CMake build folder (atto_shared's output: the top of the folder)."""
    lib = Path(folder) / "libatto.so"
    return lib if lib.exists() else None


class BuildExt(build_ext):
    """(b): link ATTO_BUILD_DIR's libatto.so; (a): build libatto with CMake first and ship it."""

    def run(self):
        ext = self.extensions[0]
        if BUILD_DIR:
            lib_dir = Path(BUILD_DIR).resolve()
            if not shared_lib_in(lib_dir):
                sys.exit(f"setup.py: no libatto.so in ATTO_BUILD_DIR={BUILD_DIR}: build it with "
                         f"`cmake --build {BUILD_DIR} --target atto_shared`")
            ext.runtime_library_dirs = [str(lib_dir)]
            ext.depends.append(str(lib_dir / "libatto.so"))
        else:
            lib_dir = self.build_libatto()
            ext.runtime_library_dirs = ["$ORIGIN"]  # libatto.so.0 beside the extension
            pkg_dir = Path(self.build_lib) / "atto"
            pkg_dir.mkdir(parents=True, exist_ok=True)
            shutil.copyfile((lib_dir / "libatto.so").resolve(), pkg_dir / "libatto.so.0")
            if self.inplace:
                shutil.copyfile((lib_dir / "libatto.so").resolve(), HERE / "atto" / "libatto.so.0")
        ext.library_dirs = [str(lib_dir)]
        super().run()

    def build_libatto(self):
        build = Path(self.build_temp).resolve() / "libatto"
        cmake = shutil.which("cmake")
        if not cmake:
            sys.exit("setup.py: cmake not found (scripts/setup installs it), or set ATTO_BUILD_DIR to a built atto")
        args = [cmake, "-S", str(SOURCE), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release", "-DATTO_BUILD_TESTS=OFF",
                "-DATTO_BUILD_BENCH=OFF", "-DATTO_MPI=OFF"]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        args += shlex.split(os.environ.get("ATTO_CMAKE_ARGS", ""))
        if not (build / "CMakeCache.txt").exists():
            subprocess.check_call(args)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.check_call([cmake, "--build", str(build), "--target", "atto_shared", "-j", jobs])
        return build


def build_options():
    """(b): the package's build files under ATTO_BUILD_DIR/python-build (the source tree stays clean;
    an unchanged extension is not compiled again)."""
    if not BUILD_DIR:
        return {}
    base = str(Path(BUILD_DIR).resolve() / "python-build")
    return {"build": {"build_base": base}, "egg_info": {"egg_base": base}}


if BUILD_DIR:
    os.makedirs(Path(BUILD_DIR).resolve() / "python-build", exist_ok=True)

core = Extension(
    "atto._core",
    sources=[str(Path("src") / "atto_core.cpp")],
    include_dirs=[str(INCLUDE)] + pybind11_include(),
    depends=[str(INCLUDE / "atto" / "atto.h")],
    libraries=["atto"],
    define_macros=[("ATTO_SHARED", None)],
    extra_compile_args=["-std=c++20", "-O2", "-g0", "-fvisibility=hidden"],
    language="c++",
)

setup(
    name="atto",
    version=atto_version(),
    description="atto, a small-transformer engine: train, sample and score from Python",
    long_description=(SOURCE / "docs" / "python.md").read_text() if (SOURCE / "docs" / "python.md").exists() else "",
    long_description_content_type="text/markdown",
    packages=["atto"],
    package_data={"atto": ["py.typed", "*.pyi", "libatto.so.0"]},
    ext_modules=[core],
    cmdclass={"build_ext": BuildExt},
    options=build_options(),
    python_requires=">=3.9",
    install_requires=["numpy"],
    zip_safe=False,
)
