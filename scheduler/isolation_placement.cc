#include "scheduler/isolation_placement.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "scheduler/base/log_throttle.h"
#include "scheduler/base/logging.h"

namespace gpuprio::scheduler {

bool IsolationPlacement::SharesSmsWithPeers() {
  // Asked before any partition exists: a process whose only more important work is another
  // process's must learn it runs under MPS to confine anything at all.
  if (!mps_known_) {
    mps_known_ = true;
    int mps = 0;
    mps_ = driver_.device_get_attribute != nullptr &&
           driver_.device_get_attribute(&mps, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, device_) ==
               CUDA_SUCCESS &&
           mps != 0;
  }
  return mps_;
}

bool IsolationPlacement::EnsurePartition() {
  if (partition_ != nullptr) return true;
  if (partition_tried_) return false;
  partition_tried_ = true;
  (void)SharesSmsWithPeers();  // for the message below
  absl::StatusOr<std::unique_ptr<SmPartition>> p =
      SmPartition::Create(driver_, device_, reserved_sms_);
  if (!p.ok()) {
    Logf(LogLevel::kInfo,
         "isolation off on device %d: %s; lower-priority work is held to the in-flight budget "
         "instead",
         device_, std::string(p.status().message()).c_str());
    return false;
  }
  partition_ = *std::move(p);
  Logf(LogLevel::kInfo, "isolation: device %d: %d of %d SMs for confined work (%d reserved)%s",
       device_, partition_->confined_sms(), partition_->device_sms(),
       partition_->device_sms() - partition_->confined_sms(), mps_ ? ", MPS" : "");
  return true;
}

void IsolationPlacement::NoteNotConfinedBelow(int level) {
  if (level == kNoPriority || said_whole_device_) return;
  said_whole_device_ = true;
  Logf(LogLevel::kInfo,
       "isolation: device %d: work below priority %d is held, not confined, while that level "
       "launches CUDA graphs (a graph's work needs the whole GPU; docs/isolation.md)",
       device_, level);
}

void IsolationPlacement::Forget(StreamQueue* q) {
  ContextLinks* links = q->links;
  if (links == nullptr) return;
  if (q->away) {  // not expected: a stream is brought home before it is destroyed
    q->away = false;
    --links->away;
    streams_away_.fetch_sub(1, std::memory_order_seq_cst);
    if (q->state->legacy) {
      legacy_away_.fetch_sub(1, std::memory_order_seq_cst);
    } else if (q->state->blocking) {
      blocking_away_.fetch_sub(1, std::memory_order_seq_cst);
    }
    q->state->away.store(false, std::memory_order_seq_cst);
  }
  if (links->legacy == q) links->legacy = nullptr;
  links->blocking.erase(std::remove(links->blocking.begin(), links->blocking.end(), q),
                        links->blocking.end());
  if (q->twin != nullptr && partition_ != nullptr) partition_->DestroyTwin(q->twin);
  q->twin = nullptr;
  q->links = nullptr;
}

CUstream IsolationPlacement::Place(StreamQueue* q, bool confine) {
  if (confine && q->twin == nullptr && !q->twin_failed && partition_ != nullptr) {
    // Green-context streams must be non-blocking; what a blocking stream's order with the legacy
    // stream needs is kept by links instead (LinkLegacyOrder). The CUDA priority carries over.
    int priority = 0;
    if (!q->state->legacy) driver_.stream_get_priority(q->state->stream, &priority);
    absl::StatusOr<CUstream> twin = partition_->CreateTwin(CU_STREAM_NON_BLOCKING, priority);
    if (twin.ok()) {
      q->twin = *twin;
    } else {
      q->twin_failed = true;
      GPUPRIO_LOG_THROTTLED(LogLevel::kWarning,
                            "isolation: no twin for stream %p (%s); its work uses the whole GPU",
                            static_cast<void*>(q->state->stream),
                            std::string(twin.status().message()).c_str());
    }
  }
  const bool to_twin = confine && q->twin != nullptr;
  if (to_twin != q->away) SwitchLocation(q, to_twin);
  if (q->state->legacy || q->state->blocking) LinkLegacyOrder(q);
  return Location(*q);
}

void IsolationPlacement::SwitchLocation(StreamQueue* q, bool to_twin) {
  StreamState* s = q->state;
  const CUstream to = to_twin ? q->twin : s->stream;
  if (!Link(q->links, Location(*q), to)) {
    // Confinement is an optimisation: without the link the work stays where it is. Coming home
    // must happen, so the twin's work is waited for here instead.
    if (to_twin) return;
    driver_.stream_synchronize(q->twin);
  }
  q->away = to_twin;
  const int delta = to_twin ? 1 : -1;
  q->links->away += delta;
  streams_away_.fetch_add(delta, std::memory_order_seq_cst);
  if (s->legacy) {
    legacy_away_.fetch_add(delta, std::memory_order_seq_cst);
  } else if (s->blocking) {
    blocking_away_.fetch_add(delta, std::memory_order_seq_cst);
  }
  s->away.store(to_twin, std::memory_order_seq_cst);
}

void IsolationPlacement::LinkLegacyOrder(StreamQueue* q) {
  ContextLinks& links = *q->links;
  // Both sides on their own streams: CUDA orders them itself.
  if (links.away == 0) return;
  if (q->state->legacy) {
    // A legacy op follows the earlier work of every blocking stream.
    for (StreamQueue* b : links.blocking) {
      if (b->ops_issued == b->ops_followed_by_legacy) continue;
      if (b->away || q->away) {
        absl::MutexLock lock(record_mu_);
        if (!b->away && Destroyed(b->state)) continue;  // nothing may be recorded there
        Link(q->links, Location(*b), Location(*q));
      }
      b->ops_followed_by_legacy = b->ops_issued;
    }
  } else if (links.legacy != nullptr && links.legacy_ops > q->legacy_ops_followed) {
    // A blocking stream's op follows the legacy stream's earlier work.
    StreamQueue* l = links.legacy;
    if (l->away || q->away) Link(q->links, Location(*l), Location(*q));
    q->legacy_ops_followed = links.legacy_ops;
  }
}

bool IsolationPlacement::Link(ContextLinks* links, CUstream from, CUstream to) {
  if (links->link_event == nullptr &&
      driver_.event_create(&links->link_event, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
    links->link_event = nullptr;
    return false;
  }
  return driver_.event_record(links->link_event, from) == CUDA_SUCCESS &&
         driver_.stream_wait_event(to, links->link_event, 0) == CUDA_SUCCESS;
}

void IsolationPlacement::AddConfined(StreamQueue* q, uint64_t estimate_ns) {
  ++q->confined_in_flight_ops;
  q->confined_in_flight_ns += static_cast<int64_t>(estimate_ns);
  ++confined_in_flight_ops_;
  confined_in_flight_ns_ += static_cast<int64_t>(estimate_ns);
}

void IsolationPlacement::RemoveConfined(StreamQueue* q, uint64_t estimate_ns) {
  --q->confined_in_flight_ops;
  q->confined_in_flight_ns -= static_cast<int64_t>(estimate_ns);
  --confined_in_flight_ops_;
  confined_in_flight_ns_ -= static_cast<int64_t>(estimate_ns);
}

IsolationReport IsolationPlacement::Report() const {
  IsolationReport isolation;
  if (partition_ != nullptr) {
    isolation.reserved_sms = partition_->device_sms() - partition_->confined_sms();
    isolation.device_sms = partition_->device_sms();
  }
  isolation.confined_ops = confined_in_flight_ops_;
  isolation.confined_ns = confined_in_flight_ns_;
  return isolation;
}

}  // namespace gpuprio::scheduler
