// libFuzzer entry point for the CUPTI record decoder (tools/fuzz/tracer_fuzz.sh builds and runs
// it). The first byte picks the case: odd, the rest is a buffer as CUPTI filled it; even, the rest
// drives FuzzDecoderOnce (well-formed records, then mutated and cut). Both keep CUPTI's one
// guarantee that kernel names are valid strings (tests/tracer/activity_decoder_fuzzing.h).
#include <cstddef>
#include <cstdint>

#include "tests/fuzz/fuzz_failure.h"
#include "tests/tracer/activity_decoder_fuzzing.h"
#include "tests/tracer/fuzz_choices.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1) {
    gpuprio_test::AbortIfBroken(gpuprio_test::FuzzDecoderRaw(data + 1, size - 1));
  } else {
    gpuprio_test::Choices choices(data + 1, size - 1);
    gpuprio_test::AbortIfBroken(gpuprio_test::FuzzDecoderOnce(choices));
  }
  return 0;
}
