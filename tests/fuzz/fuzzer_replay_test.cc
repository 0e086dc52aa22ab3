// Runs a libFuzzer entry point (linked in by the BUILD target; FUZZ_TARGET names it) the way
// libFuzzer would, without libFuzzer: on every input of tests/fuzz/FUZZ_TARGET.corpus (one per
// line, in hex: the seeds tools/fuzz/tracer_fuzz.sh saved) and on pseudo-random inputs. A broken
// property aborts the test, as it would abort the fuzzer.
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "catch2/catch.hpp"
#include "tests/runfiles.h"
#include "tests/tracer/fuzz_choices.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace gpuprio_test {
namespace {

#define GPUPRIO_STRINGIFY_INNER(x) #x
#define GPUPRIO_STRINGIFY(x) GPUPRIO_STRINGIFY_INNER(x)
constexpr char kTarget[] = GPUPRIO_STRINGIFY(FUZZ_TARGET);

// The bytes a line of hex stands for; false if it is not hex.
bool FromHex(const std::string& line, std::vector<uint8_t>* bytes) {
  const auto digit = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  if (line.size() % 2 != 0) return false;
  bytes->clear();
  for (size_t i = 0; i < line.size(); i += 2) {
    const int high = digit(line[i]), low = digit(line[i + 1]);
    if (high < 0 || low < 0) return false;
    bytes->push_back(static_cast<uint8_t>(high * 16 + low));
  }
  return true;
}

TEST_CASE("Fuzzer entry point: every saved input", "[fuzz]") {
  const absl::StatusOr<std::string> path =
      Runfile(std::string("tests/fuzz/") + kTarget + ".corpus");
  REQUIRE(path.ok());
  std::ifstream corpus(*path);
  REQUIRE(corpus);
  int inputs = 0;
  std::string line;
  std::vector<uint8_t> bytes;
  for (int number = 1; std::getline(corpus, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    INFO("line " << number);
    REQUIRE(FromHex(line, &bytes));
    CHECK(LLVMFuzzerTestOneInput(bytes.data(), bytes.size()) == 0);
    ++inputs;
  }
  CHECK(inputs > 0);
}

TEST_CASE("Fuzzer entry point: pseudo-random inputs", "[fuzz]") {
  std::mt19937 rng(20240601);
  const int inputs = 400 / kSanitizerSlowdown;
  for (int i = 0; i < inputs; ++i) {
    std::vector<uint8_t> bytes(rng() % 512);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    INFO("input " << i);
    CHECK(LLVMFuzzerTestOneInput(bytes.data(), bytes.size()) == 0);
  }
}

}  // namespace
}  // namespace gpuprio_test
