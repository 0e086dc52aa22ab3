// libFuzzer entry point for the record join and the Chrome trace written from it
// (tools/fuzz/tracer_fuzz.sh builds and runs it): the input bytes drive FuzzJoinOnce
// (tests/tracer/trace_join_fuzzing.h), which checks every property of the result.
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_failure.h"
#include "tests/tracer/fuzz_choices.h"
#include "tests/tracer/trace_join_fuzzing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gpuprio_test::Choices choices(data, size);
  gpuprio_test::AbortIfBroken(gpuprio_test::FuzzJoinOnce(choices));
  return 0;
}
