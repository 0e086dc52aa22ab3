// GPUPRIO_TRACE_RANGE=profiler_api without the hook: a CuptiTracer on the fake libcupti, fed ops
// directly, with cupti_tracer's OnProfilerStart()/OnProfilerStop() called as the cuProfilerStart /
// cuProfilerStop wrappers call them. One tracer per process: one scenario in this binary.
#include <sys/stat.h>
#include <zlib.h>

#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "catch2/catch.hpp"
#include "cupti_tracer/cupti_library.h"
#include "cupti_tracer/cupti_tracer.h"
#include "nlohmann/json.hpp"
#include "scheduler/op.h"
#include "tests/runfiles.h"
#include "tests/test_directory.h"

namespace gpuprio::tracer {

// The loaded table lives as long as the process (the loader leaks it on purpose): kept reachable
// here for LeakSanitizer. External linkage: an optimiser may not drop the store.
const CuptiApi* g_profiler_range_test_api = nullptr;

namespace {

// Submits one op; true if the tracer recorded it (gave it an op id).
bool SubmitOne(CuptiTracer& tracer) {
  scheduler::Op op;
  op.name = "cuLaunchKernel";
  op.priority = 1;
  tracer.OnSubmit(op);
  return op.trace.op_id != 0;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

nlohmann::json ParseGzip(const std::string& path) {
  gzFile in = gzopen(path.c_str(), "rb");
  REQUIRE(in != nullptr);
  std::string text;
  char chunk[1 << 16];
  int n = 0;
  while ((n = gzread(in, chunk, sizeof(chunk))) > 0) text.append(chunk, static_cast<size_t>(n));
  gzclose(in);
  return nlohmann::json::parse(text);
}

TEST_CASE("The profiler range records from start to stop and writes the trace at stop",
          "[tracer]") {
  auto cupti = gpuprio_test::Runfile("tests/fake_cupti/libcupti.so.13");
  REQUIRE(cupti.ok());
  absl::StatusOr<const CuptiApi*> api = LoadCuptiLibrary(*cupti);
  REQUIRE(api.ok());
  g_profiler_range_test_api = *api;
  const std::string path = gpuprio_test::FreshDirectory("range") + "/range.json.gz";
  CuptiTracerOptions options;
  options.path = path;
  options.window.range = CaptureRange::kProfilerApi;
  auto tracer = CuptiTracer::Start(**api, options);
  REQUIRE(tracer.ok());

  OnProfilerStop();  // a stop before any start: ignored
  for (int i = 0; i < 3; ++i) CHECK_FALSE(SubmitOne(**tracer));

  OnProfilerStart();
  // The window's thread opens the recording: the first op recorded marks the moment.
  int recorded = 0;
  for (int i = 0; i < 3000 && recorded == 0; ++i) {
    recorded += SubmitOne(**tracer);
    if (recorded == 0) absl::SleepFor(absl::Milliseconds(10));
  }
  REQUIRE(recorded == 1);
  for (int i = 0; i < 4; ++i) recorded += SubmitOne(**tracer);
  CHECK(recorded == 5);
  CHECK_FALSE(Exists(path));

  OnProfilerStop();
  for (int i = 0; i < 3000 && !Exists(path); ++i) absl::SleepFor(absl::Milliseconds(10));
  REQUIRE(Exists(path));
  CHECK_FALSE(SubmitOne(**tracer));  // after the range: not recorded
  OnProfilerStart();                 // a second range: not recorded either
  absl::SleepFor(absl::Milliseconds(100));
  CHECK_FALSE(SubmitOne(**tracer));

  const nlohmann::json trace = ParseGzip(path);
  CHECK(trace.at("otherData").at("gpuprio").at("ops") == 5);
  // Exit's Finish finds the trace written and leaves it alone.
  struct stat before;
  REQUIRE(stat(path.c_str(), &before) == 0);
  CHECK(CuptiTracer::FinishActive().ok());
  struct stat after;
  REQUIRE(stat(path.c_str(), &after) == 0);
  CHECK(before.st_ino == after.st_ino);
}

}  // namespace
}  // namespace gpuprio::tracer
