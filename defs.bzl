"""gpuprio_cc_library: a library of the product (hook, cupti_tracer, scheduler, scheduler/base,
scheduler/coordinator); gpuprio_package_sources: the source files of such a package."""

def gpuprio_cc_library(name, copts = [], **kwargs):
    """A cc_library with the settings every part of libgpuprio.so shares.

    Hidden visibility (only the version script's cu*, dlsym and gpuprio_* names leave
    libgpuprio.so) and static linking: each library is linked into exactly one binary, the
    preloaded library or a test, never into two objects of one process.
    """
    native.cc_library(
        name = name,
        linkstatic = True,
        copts = ["-fvisibility=hidden"] + copts,
        **kwargs
    )

def gpuprio_package_sources():
    """`:sources`, every source file of the package, for //tests:architecture_files_test (each must
    be named in docs/architecture.md's file tables)."""
    native.filegroup(
        name = "sources",
        srcs = native.glob([
            "**/*.cc",
            "**/*.def",
            "**/*.h",
        ]),
        visibility = ["//tests:__pkg__"],
    )
