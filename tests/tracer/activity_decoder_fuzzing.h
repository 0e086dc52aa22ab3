// Test support: fuzz cases for the CUPTI record decoder and the properties every decode must
// have. Shared by the seeded Catch2 fuzz test and the libFuzzer entry point.
//
// Input contract (what CUPTI can hand the decoder): a buffer CUPTI filled, walked by CUPTI's own
// next-record function; any kind value (unknown and future kinds included), any field value
// (zero or huge timestamps, end < start, ids that are 0 or collide), a trailing record cut short.
// A kernel record's name is null or a NUL-terminated string CUPTI owns: garbage or unterminated
// name pointers cannot come from CUPTI, so the fuzzers restore that one guarantee after mutating.
#ifndef GPUPRIO_TESTS_TRACER_ACTIVITY_DECODER_FUZZING_H_
#define GPUPRIO_TESTS_TRACER_ACTIVITY_DECODER_FUZZING_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cupti_tracer/activity_decoder.h"
#include "tests/tracer/cupti_record_buffer.h"
#include "tests/tracer/fuzz_choices.h"

namespace gpuprio_test {

// Kernel names as CUPTI may hand them: null, empty, ordinary, 4 KiB long, not UTF-8, with
// quotes and control bytes.
const std::vector<const char*>& KernelNamePool();

// Runtime and driver names for some callback ids, the edges included.
const gpuprio::tracer::ApiNameTable& FuzzApiNames();

// Kind values worth trying: every decoded kind, every other kind CUPTI defines, values past
// CUPTI_ACTIVITY_KIND_COUNT and the 32-bit edges.
std::vector<uint32_t> InterestingKinds();

// Appends one well-formed record of `kind` with fields drawn from `choices` (ids, sizes and
// timestamps at their edges now and then; end before start too). Kinds gpuprio does not decode
// get RecordSize(kind) bytes of noise.
void AddRandomRecord(RecordBuffer& buffer, uint32_t kind, Choices& choices);

// Makes every kernel record FakeNextRecord yields from buffer[0, size) whose name field lies in
// the buffer name a string of KernelNamePool(), picked by `choices`.
void KeepNameContract(uint8_t* buffer, size_t size, Choices& choices);

// `size` bytes of `data` in a heap block of exactly that size (null for none), so that ASan sees
// any read past the end.
std::unique_ptr<uint8_t[]> ExactCopy(const uint8_t* data, size_t size);

// Decodes buffer[0, valid_bytes) into `out` (cleared first) with FakeNextRecord and returns every
// broken property, none if the decode is sound. Give it an ExactCopy.
std::vector<std::string> DecodeAndCheck(uint8_t* buffer, size_t valid_bytes,
                                        gpuprio::tracer::DecodedActivity* out);

// One fuzz case: random well-formed records, mutated (bits flipped, kinds replaced, aligned
// fields set to edge values, records repeated), the name contract restored, then decoded whole
// and cut at a random length.
std::vector<std::string> FuzzDecoderOnce(Choices& choices);

// libFuzzer's raw case: `data` as a buffer CUPTI filled (name contract restored), decoded.
std::vector<std::string> FuzzDecoderRaw(const uint8_t* data, size_t size);

}  // namespace gpuprio_test

#endif  // GPUPRIO_TESTS_TRACER_ACTIVITY_DECODER_FUZZING_H_
