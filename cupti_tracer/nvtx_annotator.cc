#include "cupti_tracer/nvtx_annotator.h"

#include <nvtx3/nvToolsExt.h>

#include <cstdio>

#include "cupti_tracer/thread_event_log.h"

namespace gpuprio::tracer {

void NvtxAnnotator::OnSubmit(scheduler::Op& op) {
  op.trace.op_id = next_op_id_.fetch_add(1, std::memory_order_relaxed);
  carrier_.Capture(op.trace);
  char message[96];
  std::snprintf(message, sizeof(message), "queued op %llu p=%d",
                static_cast<unsigned long long>(op.trace.op_id), op.priority);
  nvtxEventAttributes_t attributes = {};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = message;
  op.trace.nvtx_range = nvtxRangeStartEx(&attributes);
}

void NvtxAnnotator::OnDispatcherStart(int device) {
  char name[64];
  std::snprintf(name, sizeof(name), "gpuprio dispatcher (GPU %d)", device);
  nvtxNameOsThreadA(CurrentTid(), name);
}

void NvtxAnnotator::OnIssueBegin(const scheduler::Op& op) {
  // The queueing range ends where the issue range starts (a range may end on any thread).
  if (op.trace.nvtx_range != 0) nvtxRangeEnd(op.trace.nvtx_range);
  carrier_.Push(op.trace);
  char message[128];
  std::snprintf(message, sizeof(message), "%s op %llu p=%d", op.name != nullptr ? op.name : "op",
                static_cast<unsigned long long>(op.trace.op_id), op.priority);
  nvtxRangePushA(message);
}

void NvtxAnnotator::OnIssueEnd(const scheduler::Op& op, CUresult /*result*/) {
  nvtxRangePop();
  carrier_.Pop(op.trace);
}

}  // namespace gpuprio::tracer
