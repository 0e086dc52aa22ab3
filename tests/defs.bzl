"""gpuprio_client_test: a Catch2 test that runs client programs against the fake driver."""

# What every such test needs at run time (the fake libcuda, the TSan suppressions its children
# load) and to build (Catch2's main, the client environment and runfiles helpers).
_FAKE_DRIVER_DATA = [
    "//tests/fake_cuda:libcuda.so.1",
    "//tests/fake_cuda:tsan_dlopen.supp",
]
_CLIENT_TEST_DEPS = [
    "//tests:catch_main",
    "//tests:client_env",
    "//tests:runfiles",
]

def gpuprio_client_test(name, clients, preload = True, srcs = None, data = [], deps = [], **kwargs):
    """A cc_test `name` (source `name`.cc unless `srcs` says otherwise) that runs `clients`
    against the fake driver, with libgpuprio.so to preload unless `preload` is False."""
    native.cc_test(
        name = name,
        srcs = srcs if srcs != None else [name + ".cc"],
        data = clients + (["//hook:libgpuprio.so"] if preload else []) + _FAKE_DRIVER_DATA + data,
        deps = _CLIENT_TEST_DEPS + deps,
        **kwargs
    )
