// Fault injection: for each real driver call gpuprio's dispatcher or client paths make, one call
// fails (the fake's fakecuda_fail_calls, aimed at the dispatcher's thread or at one application
// thread) while fault_client's deferring (low priority) and direct (normal priority) threads work,
// with the fast path on and off. Checked: the error surfaces once and where CUDA would report it
// (the call itself when it was made on the caller's thread; the stream's next synchronize when the
// dispatcher made it); failures of gpuprio's own calls surface nowhere; nothing is lost beyond
// the failed call's own work, duplicated or reordered; later work runs; nothing hangs (the
// client's watchdog).
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "catch2/catch.hpp"
#include "tests/client_env.h"
#include "tests/runfiles.h"

namespace {

using gpuprio_test::Env;

struct Run {
  std::map<std::string, long> values;
  std::string stdout_text;
  std::string stderr_text;
};

// Lines gpuprio logs for a failed deferred op of the injected error (701).
int DeferredErrorLines(const std::string& text) {
  int n = 0;
  for (size_t at = 0; (at = text.find("failed with CUDA error 701", at)) != std::string::npos;
       ++at) {
    ++n;
  }
  return n;
}

Run RunFault(const std::string& fault, const std::string& target, const std::string& mode) {
  auto client = gpuprio_test::Runfile("tests/scheduler/fault_client");
  REQUIRE(client.ok());
  // Isolation off: its links are the dispatcher's own cuStreamWaitEvent calls, which a fault
  // injected into that API on the dispatcher's thread would hit instead of the app's op.
  Env extra = {{"GPUPRIO_ISOLATION", "off"}};
  if (mode == "deferred") extra.push_back({"GPUPRIO_DIRECT_ISSUE", "0"});
  auto env = gpuprio_test::ClientEnv("schedule", extra);
  REQUIRE(env.ok());
  auto result = gpuprio_test::RunProcess({*client, fault, target}, *env);
  REQUIRE(result.ok());
  INFO(fault << " failing on " << target << ", " << mode << "\nstdout:\n"
              << result->stdout_text << "\nstderr:\n"
              << result->stderr_text);
  REQUIRE(result->exit_code == 0);
  REQUIRE(result->stdout_text.find(fault + " ok") != std::string::npos);
  return {gpuprio_test::IntValues(result->stdout_text), result->stdout_text,
          result->stderr_text};
}

enum class Surfaces { kAtTheCall, kAtTheNextSync, kNowhere };

struct Case {
  const char* fault;
  const char* target;  // whose call fails
  const char* mode;    // "deferred": GPUPRIO_DIRECT_ISSUE=0; "fast": the fast path on
  Surfaces surfaces;
  long missing;        // appends that never ran: the failed launch itself
  long wrong_min, wrong_max;  // values a failed copy, set or event dependency left wrong
  bool calls_match;    // the driver received each application call of the API exactly once
};

void Verify(const Case& c) {
  const Run r = RunFault(c.fault, c.target, c.mode);
  INFO("stdout:\n" << r.stdout_text << "\nstderr:\n" << r.stderr_text);
  const auto& v = r.values;
  if (v.at("fired") == 0 && std::string(c.target) == "direct_thread") {
    // The fault waits for a call made on the application's own thread (the fast path). Whether
    // the fast path is taken depends on the dispatcher being idle at that moment; on a heavily
    // loaded machine (sanitizers, other jobs) it may not be, and then no such call exists. The
    // run must still have lost, duplicated and reordered nothing.
    WARN("the fast path was not taken in this run: the fault did not fire; checked no loss only");
    CHECK(v.at("missing") == 0);
    CHECK(v.at("duplicated") == 0);
    CHECK(v.at("out_of_order") == 0);
    CHECK(v.at("data_wrong") == 0);
    return;
  }
  CHECK(v.at("fired") == 1);  // exactly one call failed
  CHECK(v.at("other_errors") == 0);
  CHECK(v.at("immediate") == (c.surfaces == Surfaces::kAtTheCall ? 1 : 0));
  CHECK(v.at("first_sync") == (c.surfaces == Surfaces::kAtTheNextSync ? 1 : 0));
  // Once: never again, not from later work, not from the context.
  CHECK(v.at("second_sync") == 0);
  CHECK(v.at("later_sync") == 0);
  CHECK(v.at("final_ctx_sync") == 0);
  CHECK(DeferredErrorLines(r.stderr_text) ==
        (c.surfaces == Surfaces::kAtTheNextSync ? 1 : 0));
  CHECK(v.at("missing") == c.missing);
  CHECK(v.at("duplicated") == 0);
  CHECK(v.at("out_of_order") == 0);
  CHECK(v.at("foreign") == 0);
  CHECK(v.at("data_wrong") >= c.wrong_min);
  CHECK(v.at("data_wrong") <= c.wrong_max);
  if (c.calls_match) CHECK(v.at("driver_calls") == v.at("app_calls"));
  CHECK(v.at("scheduled") == 1);
}

void VerifyAll(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.fault << " failing on " << c.target << ", " << c.mode) { Verify(c); }
  }
}

// Stream work the application asked for: launches, the event record (cuEventRecordWithFlags:
// the dispatcher's own marks use cuEventRecord), stream waits, async copies and memsets.
struct StreamWork {
  const char* fault;
  long missing;
  long wrong_min, wrong_max;
};
const StreamWork kStreamWork[] = {
    {"launch", 1, 0, 0},
    {"launch_ex", 1, 0, 0},
    // The copy behind a failed record or wait may or may not see its data (it lost its
    // dependency, as natively after a failed call).
    {"event_record", 0, 0, 1},
    {"stream_wait", 0, 0, 1},
    {"copy_htod", 0, 1, 1},
    {"copy_dtoh", 0, 1, 1},
    {"copy_dtod", 0, 1, 1},
    {"memset", 0, 1, 1},
};

TEST_CASE("A deferred op whose driver call fails reports the error at its stream's next "
          "synchronize, once, and later work runs",
          "[scheduler][faults]") {
  std::vector<Case> cases;
  for (const StreamWork& w : kStreamWork) {
    for (const char* mode : {"deferred", "fast"}) {
      cases.push_back({w.fault, "dispatcher", mode, Surfaces::kAtTheNextSync, w.missing,
                       w.wrong_min, w.wrong_max, true});
    }
  }
  VerifyAll(cases);
}

TEST_CASE("An op its own thread issues (the fast path) returns the driver's error itself",
          "[scheduler][faults]") {
  std::vector<Case> cases;
  for (const StreamWork& w : kStreamWork) {
    cases.push_back({w.fault, "direct_thread", "fast", Surfaces::kAtTheCall, w.missing,
                     w.wrong_min, w.wrong_max, true});
  }
  VerifyAll(cases);
}

TEST_CASE("A synchronizing call whose driver call fails returns the error itself",
          "[scheduler][faults]") {
  std::vector<Case> cases;
  for (const char* fault : {"event_query", "event_sync"}) {
    cases.push_back({fault, "direct_thread", "fast", Surfaces::kAtTheCall, 0, 0, 0, false});
    cases.push_back({fault, "deferring_thread", "deferred", Surfaces::kAtTheCall, 0, 0, 0, false});
  }
  VerifyAll(cases);
}

TEST_CASE("A failure of gpuprio's own driver calls surfaces nowhere and costs no work",
          "[scheduler][faults]") {
  std::vector<Case> cases;
  // The dispatcher: completion marks (record, query), its events' creation, kernel timing.
  for (const char* fault : {"event_record_mark", "event_query", "event_create", "event_elapsed"}) {
    for (const char* mode : {"deferred", "fast"}) {
      cases.push_back({fault, "dispatcher", mode, Surfaces::kNowhere, 0, 0, 0, false});
    }
  }
  // Client threads: the current context (every call), a new stream's flags, a kernel's parameter
  // layout, whether host memory is pinned. The call then runs on its thread, in order.
  for (const char* fault : {"ctx_get_current", "stream_get_flags", "param_info",
                            "pointer_attribute"}) {
    for (const char* mode : {"deferred", "fast"}) {
      // Either thread may be the first to read append_u32's layout (only client threads do).
      const char* target = std::string(fault) == "param_info" ? "any" : "deferring_thread";
      cases.push_back({fault, target, mode, Surfaces::kNowhere, 0, 0, 0, false});
    }
  }
  cases.push_back({"ctx_get_current", "direct_thread", "fast", Surfaces::kNowhere, 0, 0, 0, false});
  VerifyAll(cases);
}

TEST_CASE("An op whose context the dispatcher cannot make current fails instead of running in "
          "another context",
          "[scheduler][faults]") {
  // Every context switch of the dispatcher fails for a while; context 1 was current before, so
  // context 0's ops are the ones that cannot be issued. Before the fix they ran on context 1's
  // legacy stream and no error surfaced.
  const Run r = RunFault("ctx_set_current", "dispatcher", "deferred");
  INFO("stdout:\n" << r.stdout_text << "\nstderr:\n" << r.stderr_text);
  const auto& v = r.values;
  CHECK(v.at("fired") >= 1);
  CHECK(v.at("wrong_context") == 0);
  CHECK(v.at("ctx0_first_sync") == 1);
  CHECK(v.at("ctx0_missing") >= 1);
  CHECK(v.at("ctx1_first_sync") == 0);
  CHECK(v.at("ctx1_missing") == 0);
  for (const char* k : {"ctx0_immediate", "ctx1_immediate", "ctx0_second_sync", "ctx1_second_sync",
                        "ctx0_later_sync", "ctx1_later_sync", "ctx0_other_errors",
                        "ctx1_other_errors", "duplicated", "out_of_order", "foreign",
                        "final_ctx_sync"}) {
    INFO(k);
    CHECK(v.at(k) == 0);
  }
}

TEST_CASE("cuGetProcAddress failures: the application's lookup gets the error, gpuprio's own "
          "resolution falls back",
          "[scheduler][faults]") {
  SECTION("the application's lookup fails once") {
    const Run r = RunFault("gpa_app", "direct_thread", "fast");
    INFO("stdout:\n" << r.stdout_text << "\nstderr:\n" << r.stderr_text);
    const auto& v = r.values;
    CHECK(v.at("fired") == 1);
    CHECK(v.at("immediate") == 1);
    CHECK(v.at("pointer_untouched") == 1);
    CHECK(v.at("second_lookup") == 0);
    CHECK(v.at("wrapped") == 1);
    CHECK(v.at("failed_launches") == 0);
    CHECK(v.at("first_sync") == 0);
    CHECK(v.at("missing") == 0);
    CHECK(v.at("duplicated") == 0);
    CHECK(v.at("out_of_order") == 0);
  }
  SECTION("gpuprio's first lookup fails: that entry point is found by its name, all is scheduled") {
    Verify({"gpa_resolve_first", "any", "fast", Surfaces::kNowhere, 0, 0, 0, false});
  }
  SECTION("every lookup fails: one message, the program runs unscheduled and correct") {
    const Run r = RunFault("gpa_resolve_all", "any", "fast");
    INFO("stdout:\n" << r.stdout_text << "\nstderr:\n" << r.stderr_text);
    const auto& v = r.values;
    CHECK(v.at("fired") > 1);
    CHECK(v.at("scheduled") == 0);
    CHECK(r.stderr_text.find("running unscheduled (passthrough)") != std::string::npos);
    for (const char* k : {"immediate", "first_sync", "second_sync", "later_sync", "other_errors",
                          "missing", "duplicated", "out_of_order", "foreign", "data_wrong"}) {
      INFO(k);
      CHECK(v.at(k) == 0);
    }
  }
}

}  // namespace
