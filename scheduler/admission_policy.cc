#include "scheduler/admission_policy.h"

namespace gpuprio::scheduler {

Admission Admit(int priority, uint64_t estimate_ns, const AdmissionSnapshot& s) {
  if (priority < s.highest_pending_or_in_flight) return Admission::kHoldForHigherPriority;
  if (priority >= s.ceiling) return Admission::kIssue;
  if (s.below_ceiling_in_flight_ns == 0) return Admission::kIssue;
  if (s.below_ceiling_in_flight_ns + estimate_ns <= s.budget_ns) return Admission::kIssue;
  return Admission::kHoldForBudget;
}

}  // namespace gpuprio::scheduler
