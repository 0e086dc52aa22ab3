#include "scheduler/admission_policy.h"

#include "catch2/catch.hpp"

namespace gpuprio::scheduler {
namespace {

constexpr int kNone = -1000000;

TEST_CASE("Admit holds work while higher-priority work is pending or in flight", "[scheduler]") {
  const AdmissionSnapshot s{/*highest_pending_or_in_flight=*/1, /*ceiling=*/1,
                            /*below_ceiling_in_flight_ns=*/0, /*budget_ns=*/2'000'000};
  CHECK(Admit(0, 1000, s) == Admission::kHoldForHigherPriority);
  CHECK(Admit(1, 1000, s) == Admission::kIssue);
  CHECK(Admit(2, 1000, s) == Admission::kIssue);
}

TEST_CASE("Admit keeps work below the ceiling within the budget", "[scheduler]") {
  AdmissionSnapshot s{kNone, /*ceiling=*/1, /*below_ceiling_in_flight_ns=*/1'500'000,
                      /*budget_ns=*/2'000'000};
  CHECK(Admit(0, 400'000, s) == Admission::kIssue);
  CHECK(Admit(0, 600'000, s) == Admission::kHoldForBudget);
  SECTION("the ceiling level itself is never budgeted") { CHECK(Admit(1, 10'000'000, s) == Admission::kIssue); }
  SECTION("one op is admitted when nothing below the ceiling is in flight") {
    s.below_ceiling_in_flight_ns = 0;
    CHECK(Admit(0, 50'000'000, s) == Admission::kIssue);
  }
}

}  // namespace
}  // namespace gpuprio::scheduler
