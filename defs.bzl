"""gpuprio_cc_library: a library of the product (hook, cupti_tracer, scheduler, scheduler/base)."""

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
