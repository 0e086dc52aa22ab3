// Tests of cupti_tracer/gzip_output and of .json.gz traces: a trace written to a name ending in
// .gz is gzip that gunzips (with zlib's reader, not the writer's code) to the same JSON as the
// plain file; large and odd-sized writes round-trip; a failing disk is reported.
#include "cupti_tracer/gzip_output.h"

#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "catch2/catch.hpp"
#include "cupti_tracer/chrome_trace_writer.h"
#include "nlohmann/json.hpp"
#include "tests/test_directory.h"
#include "tests/tracer/synthetic_trace.h"

namespace gpuprio::tracer {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// gunzip with zlib's gzFile reader; fails the test on a truncated or corrupt stream.
std::string Gunzip(const std::string& path) {
  gzFile in = gzopen(path.c_str(), "rb");
  REQUIRE(in != nullptr);
  std::string out;
  std::vector<char> chunk(1 << 16);
  int n = 0;
  while ((n = gzread(in, chunk.data(), static_cast<unsigned>(chunk.size()))) > 0) {
    out.append(chunk.data(), static_cast<size_t>(n));
  }
  int error = Z_OK;
  const char* message = gzerror(in, &error);
  INFO("gzread: " << message);
  CHECK(n == 0);
  CHECK(error == Z_OK);
  CHECK(gzclose(in) == Z_OK);
  return out;
}

TEST_CASE("Only names ending in .gz are gzip traces", "[tracer]") {
  CHECK(IsGzipTracePath("/tmp/trace.json.gz"));
  CHECK(IsGzipTracePath("t.gz"));
  CHECK_FALSE(IsGzipTracePath("/tmp/trace.json"));
  CHECK_FALSE(IsGzipTracePath("/tmp/trace.gz.json"));
  CHECK_FALSE(IsGzipTracePath("/tmp/gz"));
}

TEST_CASE("A .json.gz trace gunzips to the plain trace's JSON", "[tracer]") {
  const std::string dir = gpuprio_test::FreshDirectory("gz");
  gpuprio_test::ScenarioOptions options;
  options.deferred_ops = 3000;  // several MB of JSON: many chunks through deflate
  const TraceInput input = gpuprio_test::Scenario(options);
  REQUIRE(WriteChromeTrace(input, dir + "/trace.json.gz").ok());
  REQUIRE(WriteChromeTrace(input, dir + "/trace.json").ok());
  const std::string compressed = ReadAll(dir + "/trace.json.gz");
  const std::string plain = ReadAll(dir + "/trace.json");
  REQUIRE(compressed.size() > 2);
  CHECK(compressed.substr(0, 2) == "\x1f\x8b");
  CHECK(plain.front() == '{');
  const std::string gunzipped = Gunzip(dir + "/trace.json.gz");
  CHECK(gunzipped == plain);
  CHECK(gunzipped == ChromeTraceJson(input));
  CHECK(nlohmann::json::parse(gunzipped).at("otherData").at("gpuprio").at("ops") >= 3000);
  INFO("plain " << plain.size() << " bytes, gzip " << compressed.size() << " bytes");
  CHECK(compressed.size() * 5 < plain.size());  // trace JSON compresses well even at level 1
  CHECK(gpuprio_test::DirectoryEntries(dir) ==
        std::vector<std::string>{"trace.json", "trace.json.gz"});
}

TEST_CASE("WriteGzipped round-trips writes of every size, at every level", "[tracer]") {
  const std::string dir = gpuprio_test::FreshDirectory("gz_sizes");
  std::mt19937 random(7);
  std::string expected;
  for (int level : {0, 1, 6, 9}) {
    INFO("level " << level);
    const std::string path = dir + "/out" + std::to_string(level) + ".gz";
    std::FILE* out = std::fopen(path.c_str(), "wb");
    REQUIRE(out != nullptr);
    expected.clear();
    const absl::Status status = WriteGzipped(out, level, [&](std::FILE* file) {
      // 0 bytes, single bytes, sizes around stdio's and the chunk's, one above 1 MiB; both
      // compressible and random bytes.
      for (size_t size : {size_t{0}, size_t{1}, size_t{65535}, size_t{65536}, size_t{65537},
                          size_t{3}, size_t{1} << 21, size_t{100}}) {
        std::string piece(size, 'a');
        for (size_t i = 0; i < size; i += 2) piece[i] = static_cast<char>(random());
        expected += piece;
        if (size > 0 && std::fwrite(piece.data(), 1, size, file) != size) {
          return absl::DataLossError("fwrite");
        }
      }
      return absl::OkStatus();
    });
    REQUIRE(status.ok());
    REQUIRE(std::fclose(out) == 0);
    CHECK(Gunzip(path) == expected);
  }
}

TEST_CASE("A write that fails is reported, and the caller's error is kept", "[tracer]") {
  std::FILE* full = std::fopen("/dev/full", "wb");
  if (full == nullptr) {
    WARN("no /dev/full here");
    return;
  }
  std::setvbuf(full, nullptr, _IONBF, 0);  // the error shows at the write, not at fclose
  absl::Status status = WriteGzipped(full, 1, [](std::FILE* file) {
    std::string data(1 << 20, 'x');
    for (size_t i = 0; i < data.size(); i += 7) data[i] = static_cast<char>(i * 31);
    std::fwrite(data.data(), 1, data.size(), file);
    return absl::OkStatus();
  });
  CHECK(status.code() == absl::StatusCode::kDataLoss);
  CHECK(status.message().find("No space left on device") != absl::string_view::npos);
  std::fclose(full);

  std::FILE* null = std::fopen("/dev/null", "wb");
  REQUIRE(null != nullptr);
  status = WriteGzipped(null, 1, [](std::FILE*) { return absl::UnavailableError("mine"); });
  CHECK(status.code() == absl::StatusCode::kUnavailable);
  CHECK(status.message() == "mine");
  std::fclose(null);
}

}  // namespace
}  // namespace gpuprio::tracer
