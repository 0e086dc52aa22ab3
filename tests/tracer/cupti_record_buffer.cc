// The CUPTI record buffers of cupti_record_buffer.h.
#include "tests/tracer/cupti_record_buffer.h"

#include <algorithm>

namespace gpuprio_test {

size_t RecordSize(uint32_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      return sizeof(CUpti_ActivityAPI);
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return sizeof(CUpti_ActivityMemset4);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      return sizeof(CUpti_ActivityExternalCorrelation);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return sizeof(CUpti_ActivitySynchronization2);
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      return sizeof(CUpti_ActivityOverhead3);
    default:
      return 8 * (1 + kind % 16);
  }
}

std::optional<uint32_t> KindAt(const uint8_t* buffer, size_t valid_bytes, size_t offset) {
  if (offset > valid_bytes || valid_bytes - offset < sizeof(uint32_t)) return std::nullopt;
  uint32_t kind;
  std::memcpy(&kind, buffer + offset, sizeof(kind));
  return kind;
}

CUptiResult FakeNextRecord(uint8_t* buffer, size_t valid_bytes, CUpti_Activity** record) {
  size_t offset = 0;
  if (*record != nullptr) {
    const size_t at = static_cast<size_t>(reinterpret_cast<uint8_t*>(*record) - buffer);
    const std::optional<uint32_t> kind = KindAt(buffer, valid_bytes, at);
    if (!kind) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    offset = at + Aligned(RecordSize(*kind));
  }
  if (offset >= valid_bytes) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + offset);
  return CUPTI_SUCCESS;
}

std::vector<size_t> RecordOffsets(const uint8_t* buffer, size_t valid_bytes) {
  std::vector<size_t> offsets;
  for (size_t offset = 0; offset < valid_bytes;) {
    offsets.push_back(offset);
    const std::optional<uint32_t> kind = KindAt(buffer, valid_bytes, offset);
    if (!kind) break;
    offset += Aligned(RecordSize(*kind));
  }
  return offsets;
}

void RecordBuffer::AddRaw(uint32_t kind, uint8_t fill) {
  const size_t at = bytes_.size();
  const size_t size = std::max(RecordSize(kind), sizeof(kind));
  bytes_.resize(at + Aligned(size), fill);
  std::memcpy(bytes_.data() + at, &kind, sizeof(kind));
}

bool IsDecodedKind(uint32_t kind) {
  return std::find(std::begin(kDecodedKinds), std::end(kDecodedKinds), kind) !=
         std::end(kDecodedKinds);
}

bool IsKernelKind(uint32_t kind) {
  return kind == CUPTI_ACTIVITY_KIND_KERNEL || kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
}

}  // namespace gpuprio_test
