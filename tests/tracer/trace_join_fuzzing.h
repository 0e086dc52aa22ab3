// Test support: random record sets for JoinTrace and the properties its result, and the Chrome
// trace written from it, must have. Shared by the seeded Catch2 fuzz test and the libFuzzer entry
// point.
//
// Input contract: JoinTrace takes any TraceInput (pieces missing or repeated, ids 0, colliding or
// at their maximum, threads nobody named, end before start, any int64_t timestamp). The Chrome
// writer is given what the tracer can produce: timestamps in [0, 2^63) (the decoder clamps
// CUPTI's; gpuprio's own are CUPTI clock readings) and op ids below 2^63 (a counter from 1).
#ifndef GPUPRIO_TESTS_TRACER_TRACE_JOIN_FUZZING_H_
#define GPUPRIO_TESTS_TRACER_TRACE_JOIN_FUZZING_H_

#include <string>
#include <vector>

#include "cupti_tracer/trace_events.h"
#include "cupti_tracer/trace_join.h"
#include "tests/tracer/fuzz_choices.h"

namespace gpuprio_test {

struct RandomTraceOptions {
  // Only what the tracer produces (see above); else any int64_t time and any op id.
  bool tracer_output_only = false;
  int max_records = 40;  // per kind of record
};

// A record set drawn from `choices`: either the synthetic scenario with pieces dropped, repeated
// and altered, or records made up from small pools of ids, threads and times, so that ids
// collide, spans nest and overlap, and edges come up often.
gpuprio::tracer::TraceInput RandomTrace(Choices& choices, const RandomTraceOptions& options);

// Every property of `joined` = JoinTrace(input) that does not hold; empty if all do.
std::vector<std::string> JoinViolations(const gpuprio::tracer::TraceInput& input,
                                        const gpuprio::tracer::JoinedTrace& joined);

// `joined` in words, by record index (for comparing two joins).
std::string JoinDigest(const gpuprio::tracer::TraceInput& input,
                       const gpuprio::tracer::JoinedTrace& joined);

// Every property of `json` = ChromeTraceJson(input) that does not hold: valid JSON, durations
// non-negative, every flow one start and one end with each step on a slice, every GPU slice of an
// op the end of exactly one flow, the counts in otherData those of the slices.
std::vector<std::string> ChromeTraceViolations(const gpuprio::tracer::TraceInput& input,
                                               const std::string& json);

// One fuzz case: RandomTrace, joined and checked twice (the same result both times), and when
// the input is tracer output, written as a Chrome trace and checked.
std::vector<std::string> FuzzJoinOnce(Choices& choices);

}  // namespace gpuprio_test

#endif  // GPUPRIO_TESTS_TRACER_TRACE_JOIN_FUZZING_H_
