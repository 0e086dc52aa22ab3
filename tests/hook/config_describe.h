// Every field of the library's configurations as one line, so that tests can compare two whole
// configurations (and print the difference) without each field's comparison written out again.
#ifndef GPUPRIO_TESTS_HOOK_CONFIG_DESCRIBE_H_
#define GPUPRIO_TESTS_HOOK_CONFIG_DESCRIBE_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cupti_tracer/tracer_config.h"
#include "hook/config.h"

namespace gpuprio_test {

inline std::string DescribeConfig(const gpuprio::hook::Config& c) {
  return absl::StrCat(
      "mode=", gpuprio::hook::ModeName(c.mode), " log=", static_cast<int>(c.log_level),
      " priority=", c.default_priority, " budget_ns=", c.budget_ns,
      " peer_budget_ns=", c.peer_budget_ns, " direct_issue=", c.direct_issue,
      " isolation=", static_cast<int>(c.isolation), " reserved_sms=", c.reserved_sms,
      " max_queued=", c.max_queued, " max_hold_ns=", c.max_hold_ns,
      " host_yield_ns=", c.host_yield_ns, " exit_timeout_ns=", c.exit_timeout_ns,
      " coordinate=", c.coordinate, " shm_dir=", c.shm_dir, " domain=", c.domain,
      " share_gid=", c.share_gid);
}

inline std::string DescribeTracerConfig(const gpuprio::tracer::TracerConfig& c) {
  return absl::StrCat(
      "path=", c.path, " max_bytes=", c.max_bytes, " cupti_library=", c.cupti_library,
      " all_apis=", c.all_apis, " delay=", absl::FormatDuration(c.window.delay), " duration=",
      c.window.duration.has_value() ? absl::FormatDuration(*c.window.duration) : "none",
      " range=", static_cast<int>(c.window.range));
}

// Both configurations the library reads from `getenv`, described.
template <typename Getenv>
std::string DescribeEnvironment(Getenv getenv) {
  return DescribeConfig(gpuprio::hook::ParseConfig(getenv).config) + " | " +
         DescribeTracerConfig(gpuprio::tracer::ParseTracerConfig(getenv).config);
}

}  // namespace gpuprio_test

#endif  // GPUPRIO_TESTS_HOOK_CONFIG_DESCRIBE_H_
