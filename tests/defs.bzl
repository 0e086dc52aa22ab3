"""gpuprio_fake_client: a fake CUDA program linked like a -lcuda one; gpuprio_client_test: a Catch2
test that runs such programs against the fake driver."""

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

# What every fake client links: the fake driver as DT_NEEDED libcuda.so.1 (found through
# LD_LIBRARY_PATH at run time, as a -lcuda program finds the real one), its control API (reached
# through dlsym, hence -ldl), the scenario checks and the client helpers.
_FAKE_CLIENT_DEPS = [
    "//tests/fake_cuda:fake_cuda_control",
    "//tests/fake_cuda/clients:client_check",
    "//tests/scheduler:client_support",
    "@cuda//:cuda_headers",
]

def gpuprio_fake_client(name, srcs = None, deps = [], **kwargs):
    """A testonly cc_binary `name` (source `name`.cc unless `srcs` says otherwise) linked against
    the fake libcuda.so.1, with the fake's control API and the client helpers."""
    native.cc_binary(
        name = name,
        testonly = True,
        srcs = (srcs if srcs != None else [name + ".cc"]) + ["//tests/fake_cuda:libcuda.so.1"],
        linkopts = ["-ldl"],
        deps = _FAKE_CLIENT_DEPS + deps,
        **kwargs
    )
