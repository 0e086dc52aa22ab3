// A shared library that does nothing, standing in for libgpuprio.so in cli_test where a sanitizer
// build of the real one cannot be preloaded: the CLI's handling of LD_PRELOAD is what is checked.
extern "C" __attribute__((visibility("default"))) int gpuprio_test_preload_stub() { return 0; }
