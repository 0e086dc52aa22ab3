// A seeded random fuzzer of the configuration readers (hook/config, cupti_tracer/tracer_config,
// scheduler/env_vars): 100,000 environments of random bytes, long strings, numbers at and past
// the edges, whitespace, control characters and near-misses of valid words. Deterministic (fixed
// seed, no std:: distributions), a few seconds under the sanitizers. Every input must give a
// usable configuration within the documented ranges and, per bad variable, one clean message;
// a variable without a message must hold what its value says.
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "catch2/catch.hpp"
#include "cupti_tracer/tracer_config.h"
#include "hook/config.h"
#include "scheduler/base/env_vars.h"
#include "scheduler/base/logging.h"

namespace gpuprio {
namespace {

constexpr int kInputs = 100'000;
constexpr uint64_t kSeed = 0x6770757072696f;  // "gpuprio"

const char* const kVariables[] = {
    "GPUPRIO_MODE",         "GPUPRIO_PRIORITY",      "GPUPRIO_BUDGET_US",
    "GPUPRIO_MAX_QUEUED",   "GPUPRIO_DIRECT_ISSUE",  "GPUPRIO_LOG",
    "GPUPRIO_TRACE",        "GPUPRIO_TRACE_MAX_MB",  "GPUPRIO_TRACE_ALL_APIS",
    "GPUPRIO_CUPTI_LIBRARY", "GPUPRIO_EXIT_TIMEOUT_MS", "GPUPRIO_PEER_BUDGET_US",
    "GPUPRIO_MAX_HOLD_MS"};

const char* const kWords[] = {"schedule", "passthrough", "off",  "error", "warning", "warn",
                              "info",     "debug",       "low",  "normal", "high",  "0",
                              "1",        "-1",          "100",  "-100",  "512",   "2000"};

const char* const kEdgeNumbers[] = {
    "0", "1", "-1", "2", "100", "101", "-100", "-101", "1024", "10000000", "10000001", "1000000",
    "1000001", "1048576", "1048577", "2147483647", "2147483648", "-2147483648", "-2147483649",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "18446744073709551615", "18446744073709551616", "99999999999999999999999999999", "+5", "-0",
    "+0", "00001", "1e3", "0x10", "1.5", "1_000", "--1", "+-1", "١٢", "0b1", "7 7", ""};

const char kSpaces[] = " \t\n\r\v\f";

// REQUIRE without Catch's per-assertion cost (millions of checks): fails with the input's number.
int g_input = 0;
#define FUZZ_REQUIRE(condition)                                                 \
  do {                                                                          \
    if (!(condition)) FAIL("input " << g_input << ": " << #condition);          \
  } while (false)

class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  uint64_t Below(uint64_t n) { return rng_() % n; }
  bool OneIn(uint64_t n) { return Below(n) == 0; }

  // Any byte but NUL (environment values are C strings).
  char Byte() { return static_cast<char>(1 + Below(255)); }

  std::string Bytes(size_t n) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += Byte();
    return s;
  }

  std::string Whitespace() {
    std::string s;
    for (uint64_t i = Below(4); i > 0; --i) s += kSpaces[Below(sizeof(kSpaces) - 1)];
    return s;
  }

  std::string RandomCase(std::string s) {
    for (char& c : s) {
      if (OneIn(2)) c = absl::ascii_toupper(static_cast<unsigned char>(c));
    }
    return s;
  }

  std::string Digits() {
    std::string s = OneIn(3) ? (OneIn(2) ? "-" : "+") : "";
    for (uint64_t i = 1 + Below(30); i > 0; --i) s += static_cast<char>('0' + Below(10));
    return s;
  }

  // One edit (insert, delete, replace) of `s`.
  std::string NearMiss(std::string s) {
    const size_t at = s.empty() ? 0 : Below(s.size());
    switch (Below(3)) {
      case 0:
        s.insert(s.begin() + at, Byte());
        break;
      case 1:
        if (!s.empty()) s.erase(at, 1);
        break;
      default:
        if (!s.empty()) s[at] = Byte();
        break;
    }
    return s;
  }

  std::string Value() {
    switch (Below(8)) {
      case 0:
        return Bytes(Below(64));
      case 1:  // long: now and then past a log line (4096 bytes), or far past anything sensible
        if (!OneIn(16)) return Bytes(64 + Below(200));
        return OneIn(4) ? Bytes(1000 + Below(20000)) : std::string(4000 + Below(6000), 'x');
      case 2:
        return Whitespace() + kEdgeNumbers[Below(std::size(kEdgeNumbers))] + Whitespace();
      case 3:
        return Whitespace() + Digits() + Whitespace();
      case 4:
        return Whitespace() + RandomCase(kWords[Below(std::size(kWords))]) + Whitespace();
      case 5:
        return NearMiss(kWords[Below(std::size(kWords))]);
      case 6: {  // control characters around and inside a word
        std::string s = kWords[Below(std::size(kWords))];
        s.insert(Below(s.size() + 1), 1, static_cast<char>(1 + Below(31)));
        return s;
      }
      default:
        return Whitespace();
    }
  }

 private:
  std::mt19937_64 rng_;
};

std::string Trimmed(const std::string& s) { return std::string(absl::StripAsciiWhitespace(s)); }

bool Clean(const std::string& message) {
  for (char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) return false;
  }
  return true;
}

// The problem about `name`, or null; fails if there are two.
const std::string* ProblemAbout(const std::vector<std::string>& problems, const char* name) {
  const std::string prefix = absl::StrCat(name, "=\"");
  const std::string* found = nullptr;
  for (const std::string& problem : problems) {
    if (!absl::StartsWith(problem, prefix)) continue;
    FUZZ_REQUIRE(found == nullptr);
    found = &problem;
  }
  return found;
}

// Checks one integer variable: no problem means the value (or the default when blank); a problem
// means the default.
void CheckInteger(const std::map<std::string, std::string>& env,
                  const std::vector<std::string>& problems, const char* name, int64_t min,
                  int64_t max, int64_t actual, int64_t default_value) {
  auto it = env.find(name);
  const std::string value = it == env.end() ? "" : Trimmed(it->second);
  if (ProblemAbout(problems, name) != nullptr) {
    FUZZ_REQUIRE(actual == default_value);
    return;
  }
  if (value.empty()) {
    FUZZ_REQUIRE(actual == default_value);
    return;
  }
  // A reference parse: strtoll of the whole trimmed value, no leftovers, in range.
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(value.c_str(), &end, 10);
  FUZZ_REQUIRE(errno == 0);
  FUZZ_REQUIRE(*end == '\0');
  FUZZ_REQUIRE(parsed >= min);
  FUZZ_REQUIRE(parsed <= max);
  FUZZ_REQUIRE(actual == parsed);
}

TEST_CASE("The configuration readers survive 100,000 random environments", "[config][fuzz]") {
  Generator gen(kSeed);
  // Every 8th message is logged too (Log's line assembly is part of what is fuzzed), to /dev/null.
  std::fflush(stderr);
  const int saved_stderr = dup(STDERR_FILENO);
  std::FILE* null = std::fopen("/dev/null", "w");
  REQUIRE(null != nullptr);
  dup2(fileno(null), STDERR_FILENO);

  uint64_t problems_seen = 0;
  uint64_t warnings_seen = 0;
  for (int input = 0; input < kInputs; ++input) {
    std::map<std::string, std::string> env;
    for (const char* name : kVariables) {
      if (gen.OneIn(2)) env[name] = gen.Value();
    }
    if (gen.OneIn(20)) env[gen.OneIn(2) ? "GPUPRIO_PRIORTY" : "GPUPRIO_" + gen.Bytes(8)] = "x";
    auto getenv = [&env](const char* name) -> const char* {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    };

    const ParsedEnv<hook::Config> parsed = hook::ParseConfig(getenv);
    const ParsedEnv<tracer::TracerConfig> traced = tracer::ParseTracerConfig(getenv);
    const hook::Config& c = parsed.config;
    const tracer::TracerConfig& t = traced.config;
    g_input = input;

    // Every configuration is usable: within the documented ranges.
    FUZZ_REQUIRE(c.default_priority >= -100);
    FUZZ_REQUIRE(c.default_priority <= 100);
    FUZZ_REQUIRE(c.budget_ns % 1000 == 0);
    FUZZ_REQUIRE(c.budget_ns >= 1000);
    FUZZ_REQUIRE(c.budget_ns <= uint64_t{10'000'000} * 1000);
    FUZZ_REQUIRE(c.max_queued >= 2);
    FUZZ_REQUIRE(c.max_queued <= 1'000'000);
    FUZZ_REQUIRE(t.max_bytes % (size_t{1} << 20) == 0);
    FUZZ_REQUIRE(t.max_bytes >= size_t{1} << 20);
    FUZZ_REQUIRE(t.max_bytes <= size_t{1} << 40);

    // Every message is one clean line about one variable that was set, saying what happens.
    for (const auto* problems : {&parsed.problems, &traced.problems}) {
      for (const std::string& problem : *problems) {
        FUZZ_REQUIRE(Clean(problem));
        FUZZ_REQUIRE(absl::StrContains(problem, "\" is not valid (accepted: "));
        FUZZ_REQUIRE((absl::EndsWith(problem, ")") &&
                 (absl::StrContains(problem, "; using the default (") ||
                  absl::EndsWith(problem, "; running unscheduled (passthrough)"))));
        FUZZ_REQUIRE(env.count(problem.substr(0, problem.find('='))) == 1);
        if (++problems_seen % 8 == 0) Log(LogLevel::kError, problem);
      }
    }

    // Each variable holds what its value says, or its fallback when there is a message about it.
    const std::string mode = env.count("GPUPRIO_MODE") ? Trimmed(env["GPUPRIO_MODE"]) : "";
    if (ProblemAbout(parsed.problems, "GPUPRIO_MODE") != nullptr) {
      FUZZ_REQUIRE(c.mode == hook::Mode::kPassthrough);
    } else {
      FUZZ_REQUIRE(hook::ModeName(c.mode) == (mode.empty() ? "schedule" : absl::AsciiStrToLower(mode)));
    }
    const std::string priority =
        env.count("GPUPRIO_PRIORITY") ? Trimmed(env["GPUPRIO_PRIORITY"]) : "";
    if (ProblemAbout(parsed.problems, "GPUPRIO_PRIORITY") != nullptr) {
      FUZZ_REQUIRE(c.default_priority == 0);
    } else if (!priority.empty()) {
      FUZZ_REQUIRE(hook::ParsePriority(priority) == c.default_priority);
    }
    CheckInteger(env, parsed.problems, "GPUPRIO_BUDGET_US", 1, 10'000'000,
                 static_cast<int64_t>(c.budget_ns / 1000), 2000);
    CheckInteger(env, parsed.problems, "GPUPRIO_PEER_BUDGET_US", 1, 10'000'000,
                 static_cast<int64_t>(c.peer_budget_ns / 1000), 500);
    CheckInteger(env, parsed.problems, "GPUPRIO_MAX_QUEUED", 2, 1'000'000,
                 static_cast<int64_t>(c.max_queued), 1024);
    CheckInteger(env, parsed.problems, "GPUPRIO_MAX_HOLD_MS", 0, 3'600'000,
                 static_cast<int64_t>(c.max_hold_ns / 1'000'000), 100);
    CheckInteger(env, parsed.problems, "GPUPRIO_EXIT_TIMEOUT_MS", 1, 86'400'000,
                 static_cast<int64_t>(c.exit_timeout_ns / 1'000'000), 30000);
    CheckInteger(env, traced.problems, "GPUPRIO_TRACE_MAX_MB", 1, 1 << 20,
                 static_cast<int64_t>(t.max_bytes >> 20), 512);
    const std::string direct =
        env.count("GPUPRIO_DIRECT_ISSUE") ? Trimmed(env["GPUPRIO_DIRECT_ISSUE"]) : "";
    FUZZ_REQUIRE(c.direct_issue == (direct != "0"));
    const std::string all = env.count("GPUPRIO_TRACE_ALL_APIS") ? Trimmed(env["GPUPRIO_TRACE_ALL_APIS"]) : "";
    FUZZ_REQUIRE(t.all_apis == (all == "1"));
    FUZZ_REQUIRE(t.path == (env.count("GPUPRIO_TRACE") ? Trimmed(env["GPUPRIO_TRACE"]) : ""));
    FUZZ_REQUIRE(t.cupti_library ==
            (env.count("GPUPRIO_CUPTI_LIBRARY") ? Trimmed(env["GPUPRIO_CUPTI_LIBRARY"]) : ""));

    // The whole-environment checks.
    std::vector<std::string> entries;
    for (const auto& [name, value] : env) entries.push_back(absl::StrCat(name, "=", value));
    std::vector<const char*> environment;
    for (const std::string& entry : entries) environment.push_back(entry.c_str());
    for (const std::string& warning : EnvironmentWarnings(environment, gen.OneIn(2))) {
      FUZZ_REQUIRE(Clean(warning));
      ++warnings_seen;
    }
  }

  std::fflush(stderr);
  dup2(saved_stderr, STDERR_FILENO);
  close(saved_stderr);
  std::fclose(null);
  std::printf("config fuzz: %d environments, %llu messages, %llu environment warnings\n", kInputs,
              static_cast<unsigned long long>(problems_seen),
              static_cast<unsigned long long>(warnings_seen));
  CHECK(problems_seen > kInputs);  // the generator does reach the error paths
}

}  // namespace
}  // namespace gpuprio
