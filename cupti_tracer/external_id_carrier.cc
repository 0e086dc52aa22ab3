#include "cupti_tracer/external_id_carrier.h"

#include "absl/base/attributes.h"
#include "scheduler/base/tls.h"

namespace gpuprio::tracer {
namespace {

constexpr CUpti_ExternalCorrelationKind kCarriedKinds[scheduler::OpTraceContext::kCarriedKinds] = {
    CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1};

ABSL_CONST_INIT std::atomic<uint64_t> g_next_carrier_id{1};

}  // namespace

// Thread-local: external linkage (hidden), initial-exec, as everywhere in gpuprio (see
// scheduler/base/tls.h for the linker bug that rules out internal linkage).
namespace internal_external_id_carrier {
// Ops this thread may submit before it looks for libcupti again, for the carrier `carrier_id`
// (another carrier, or none yet: look at the next op).
struct Recheck {
  uint64_t carrier_id;
  uint32_t ops_left;
};
GPUPRIO_THREAD_LOCAL Recheck t_recheck = {0, 0};
}  // namespace internal_external_id_carrier

using internal_external_id_carrier::t_recheck;

ExternalIdCarrier::ExternalIdCarrier(Finder finder, uint32_t recheck_every)
    : finder_(finder),
      recheck_every_(recheck_every == 0 ? 1 : recheck_every),
      id_(g_next_carrier_id.fetch_add(1, std::memory_order_relaxed)) {}

ExternalIdCarrier::ExternalIdCarrier(const ExternalIdFunctions& fns)
    : finder_(nullptr), recheck_every_(1), id_(0) {
  if (fns.ok()) {
    storage_ = fns;
    claimed_.store(true, std::memory_order_relaxed);
    fns_.store(&storage_, std::memory_order_release);
  }
}

const ExternalIdFunctions* ExternalIdCarrier::Functions() {
  const ExternalIdFunctions* fns = fns_.load(std::memory_order_acquire);
  if (fns != nullptr || finder_ == nullptr) return fns;
  if (t_recheck.carrier_id == id_ && t_recheck.ops_left > 0) {
    --t_recheck.ops_left;
    return nullptr;
  }
  t_recheck = internal_external_id_carrier::Recheck{id_, recheck_every_ - 1};
  const ExternalIdFunctions found = finder_();
  if (!found.ok()) return nullptr;
  // One thread fills storage_ and publishes it; a thread that loses the race skips this op.
  if (claimed_.exchange(true, std::memory_order_acq_rel)) return nullptr;
  storage_ = found;
  fns_.store(&storage_, std::memory_order_release);
  return &storage_;
}

void ExternalIdCarrier::Capture(scheduler::OpTraceContext& ctx) {
  ctx.carried_mask = 0;
  const ExternalIdFunctions* fns = Functions();
  if (fns == nullptr) return;
  for (int k = 0; k < scheduler::OpTraceContext::kCarriedKinds; ++k) {
    uint64_t id = 0;
    if (fns->pop(kCarriedKinds[k], &id) != CUPTI_SUCCESS) continue;  // nothing pushed
    fns->push(kCarriedKinds[k], id);  // restore the client's stack at once
    ctx.carried_ids[k] = id;
    ctx.carried_mask |= static_cast<uint8_t>(1u << k);
  }
}

void ExternalIdCarrier::Push(const scheduler::OpTraceContext& ctx) const {
  if (ctx.carried_mask == 0) return;
  // Non-null: Capture set bits only after finding the functions, and fns_ is never reset.
  const ExternalIdFunctions* fns = fns_.load(std::memory_order_acquire);
  for (int k = 0; k < scheduler::OpTraceContext::kCarriedKinds; ++k) {
    if (ctx.carried_mask & (1u << k)) fns->push(kCarriedKinds[k], ctx.carried_ids[k]);
  }
}

void ExternalIdCarrier::Pop(const scheduler::OpTraceContext& ctx) const {
  if (ctx.carried_mask == 0) return;
  const ExternalIdFunctions* fns = fns_.load(std::memory_order_acquire);
  for (int k = scheduler::OpTraceContext::kCarriedKinds - 1; k >= 0; --k) {
    uint64_t ignored = 0;
    if (ctx.carried_mask & (1u << k)) fns->pop(kCarriedKinds[k], &ignored);
  }
}

}  // namespace gpuprio::tracer
