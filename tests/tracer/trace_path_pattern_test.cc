// Tests of cupti_tracer/trace_path_pattern: GPUPRIO_TRACE's placeholders, expanded and refused.
#include "cupti_tracer/trace_path_pattern.h"

#include <unistd.h>

#include <map>
#include <string>

#include "catch2/catch.hpp"

namespace {

using gpuprio::tracer::CurrentTracePathContext;
using gpuprio::tracer::ExpandedTracePath;
using gpuprio::tracer::ExpandTracePath;
using gpuprio::tracer::TracePathContext;

std::map<std::string, std::string>* g_env = nullptr;

const char* FakeGetenv(const char* name) {
  auto it = g_env->find(name);
  return it == g_env->end() ? nullptr : it->second.c_str();
}

ExpandedTracePath Expand(const std::string& pattern, std::map<std::string, std::string> env = {}) {
  g_env = &env;
  TracePathContext context;
  context.pid = 4242;
  context.hostname = "node7";
  ExpandedTracePath out = ExpandTracePath(pattern, context, FakeGetenv);
  g_env = nullptr;
  return out;
}

TEST_CASE("A name without placeholders is unchanged", "[tracer]") {
  const ExpandedTracePath out = Expand("/tmp/run/trace.json.gz");
  CHECK(out.path == "/tmp/run/trace.json.gz");
  CHECK(out.warnings.empty());
}

TEST_CASE("%p, %h, %q{VAR} and %% expand", "[tracer]") {
  const ExpandedTracePath out =
      Expand("/t/%h-%p.rank%q{RANK}_%q{JOB_ID}%%.json", {{"RANK", "3"}, {"JOB_ID", "j-9"}});
  CHECK(out.path == "/t/node7-4242.rank3_j-9%.json");
  CHECK(out.warnings.empty());
  CHECK(Expand("%p%p").path == "42424242");
  CHECK(Expand("%%p").path == "%p");  // %% first: the p is literal
}

TEST_CASE("An unset or empty %q{VAR} is kept literally, with a warning naming it", "[tracer]") {
  ExpandedTracePath out = Expand("trace.%q{LOCAL_RANK}.json");
  CHECK(out.path == "trace.%q{LOCAL_RANK}.json");
  REQUIRE(out.warnings.size() == 1);
  CHECK(out.warnings[0] ==
        "GPUPRIO_TRACE=\"trace.%q{LOCAL_RANK}.json\": %q{LOCAL_RANK}: LOCAL_RANK is not set; "
        "kept literally");
  out = Expand("trace.%q{LOCAL_RANK}.json", {{"LOCAL_RANK", ""}});
  CHECK(out.path == "trace.%q{LOCAL_RANK}.json");
  REQUIRE(out.warnings.size() == 1);
  CHECK(out.warnings[0].find("LOCAL_RANK is empty") != std::string::npos);
}

TEST_CASE("Malformed placeholders are kept literally, with one warning each", "[tracer]") {
  ExpandedTracePath out = Expand("a%xb");
  CHECK(out.path == "a%xb");
  REQUIRE(out.warnings.size() == 1);
  CHECK(out.warnings[0].find("%x is not a placeholder") != std::string::npos);

  out = Expand("trace%");
  CHECK(out.path == "trace%");
  CHECK(out.warnings.size() == 1);

  for (const char* bad : {"t%q", "t%qRANK", "t%q{RANK", "t%q{}", "t%q{1X}", "t%q{A-B}"}) {
    INFO(bad);
    out = Expand(bad, {{"RANK", "1"}});
    CHECK(out.path == bad);
    REQUIRE(out.warnings.size() == 1);
    CHECK(out.warnings[0].find("%q must be followed by {NAME}") != std::string::npos);
  }
  out = Expand("%y-%p-%q{NOPE}");
  CHECK(out.path == "%y-4242-%q{NOPE}");
  CHECK(out.warnings.size() == 2);
}

TEST_CASE("The current context is this process and this host", "[tracer]") {
  const TracePathContext context = CurrentTracePathContext();
  CHECK(context.pid == static_cast<long>(getpid()));
  char host[256] = {};
  REQUIRE(gethostname(host, sizeof(host) - 1) == 0);
  CHECK(context.hostname == host);
}

}  // namespace
