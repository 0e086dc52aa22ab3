"""GLIBC_FLOOR_LINKOPTS and GLIBC_FLOOR_LINKER_INPUTS: a cc_binary that adds both to its linkopts and
additional_linker_inputs links against Debian 11's glibc 2.31 (tools/setup.sh unpacks it) instead
of the host's, so it needs no glibc symbol version above what glibc 2.31 has (libgpuprio.so also
depends on //hook:glibc_compat, which pins or defines the few that would be above 2.28).
docs/decisions/2026-11-27-glibc-floor.md."""

# Relative to the execution root, where Bazel stages the link_files inputs.
_LIB = "third_party/glibc_floor/bullseye/lib"

_SANITIZERS = {
    "//third_party/glibc_floor:asan": [],
    "//third_party/glibc_floor:tsan": [],
}

# -L: -lc, -lm, -lpthread, -ldl, -lrt and -lz (the toolchain's, gcc's and the linkopts') find
# glibc 2.31's first (every -L comes before the compiler's own directories). -B: gcc and clang take
# the start files (Scrt1.o, crti.o, crtn.o) from there too. -rpath-link: the libraries' own
# dependencies resolve there as well. -z defs: a symbol glibc 2.31 does not have is a link error,
# not a library that fails to load.
GLIBC_FLOOR_LINKOPTS = select(dict(_SANITIZERS, **{
    "//conditions:default": [
        "-L" + _LIB,
        "-B" + _LIB + "/",
        "-Wl,-rpath-link," + _LIB,
        "-Wl,-z,defs",
    ],
}))

GLIBC_FLOOR_LINKER_INPUTS = select(dict(_SANITIZERS, **{
    "//conditions:default": ["//third_party/glibc_floor:link_files"],
}))
