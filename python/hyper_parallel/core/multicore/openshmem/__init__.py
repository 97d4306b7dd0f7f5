"""The OpenSHMEM C API's tools (docs/openshmem.md): the compiler wrappers hps-oshcc and
hps-oshc++, and the launcher hps-oshrun.

The package holds the library (lib/libhps_oshmem.so), the headers (include/shmem.h, shmemx.h,
mpp/) and the native launcher (bin/hps-oshrun); these entry points only find them and hand over
to the compiler or the launcher. Nothing here imports torch.

hps-oshcc [compiler arguments]   runs $HPS_OSHCC_CC (default cc) with the include path and, when it
                                 links, the library and its run path. --showme prints the command
                                 instead; --pkg-config-path prints the folder of hps-oshmem.pc.
hps-oshc++ [compiler arguments]  the same with $HPS_OSHCXX_CXX (default c++).
hps-oshrun -np N program [args]  starts N PEs on this machine (hps-oshrun --help).
"""
import os
import pathlib
import shlex
import sys

_HERE = pathlib.Path(__file__).resolve().parent
# Arguments after which the compiler does not link.
_NO_LINK = {"-c", "-S", "-E", "-M", "-MM"}


def _paths():
    include, lib = _HERE / "include", _HERE / "lib"
    if not (include / "shmem.h").is_file() or not (lib / "libhps_oshmem.so").is_file():
        sys.exit(f"hps-oshcc: the OpenSHMEM headers or library are missing under {_HERE} "
                 "(reinstall the package: bash scripts/install.sh)")
    return include, lib


def _compile(default_compiler: str, variable: str) -> None:
    args = sys.argv[1:]
    include, lib = _paths()
    if args == ["--pkg-config-path"]:
        print(lib / "pkgconfig")
        return
    showme = "--showme" in args
    args = [a for a in args if a != "--showme"]
    compiler = shlex.split(os.environ.get(variable, default_compiler))
    command = compiler + [f"-I{include}"] + args
    if args and not _NO_LINK.intersection(args):
        command += [f"-L{lib}", f"-Wl,-rpath,{lib}", "-lhps_oshmem"]
    if showme:
        print(shlex.join(command))
        return
    os.execvp(command[0], command)


def oshcc() -> None:
    """hps-oshcc: the C compiler with the OpenSHMEM headers and library."""
    _compile("cc", "HPS_OSHCC_CC")


def oshcxx() -> None:
    """hps-oshc++: the C++ compiler with the OpenSHMEM headers and library."""
    _compile("c++", "HPS_OSHCXX_CXX")


def oshrun() -> None:
    """hps-oshrun: the native launcher (bin/hps-oshrun)."""
    launcher = _HERE / "bin" / "hps-oshrun"
    if not launcher.is_file():
        sys.exit(f"hps-oshrun: the launcher is missing under {_HERE} (reinstall the package)")
    os.execv(launcher, [str(launcher)] + sys.argv[1:])
