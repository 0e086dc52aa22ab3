// Highest-priority-first admission, as a pure function of a snapshot (no clocks, no driver):
// may an op of a given priority be issued now?
//
//   1. Nothing is issued while work of a higher priority is pending or in flight.
//   2. Ops below the ceiling (the highest priority active recently) keep their in-flight work
//      within `budget_ns` of estimated GPU time, so a higher-priority arrival waits for at most
//      about one budget of lower-priority work already on the GPU. One op is always admitted when
//      nothing of its level or below is in flight, so an op longer than the budget still runs.
//      (What counts as in flight is the dispatcher's to say: with nothing more important about,
//      it leaves out the op each stream runs now.)
#ifndef GPUPRIO_SCHEDULER_ADMISSION_POLICY_H_
#define GPUPRIO_SCHEDULER_ADMISSION_POLICY_H_

#include <cstdint>

namespace gpuprio::scheduler {

struct AdmissionSnapshot {
  int highest_pending_or_in_flight;  // over all other ops of the device
  int ceiling;                       // highest priority that submitted work recently
  uint64_t below_ceiling_in_flight_ns;  // estimated GPU time in flight below the ceiling
  uint64_t budget_ns;
};

enum class Admission {
  kIssue,
  kHoldForHigherPriority,  // rule 1
  kHoldForBudget,          // rule 2
};

Admission Admit(int priority, uint64_t estimate_ns, const AdmissionSnapshot& s);

}  // namespace gpuprio::scheduler

#endif  // GPUPRIO_SCHEDULER_ADMISSION_POLICY_H_
