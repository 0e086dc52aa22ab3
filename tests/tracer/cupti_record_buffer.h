// Test support: CUPTI activity buffers made of the real record structs of <cupti_activity.h>, laid
// out as CUPTI lays them (end to end, 8-byte aligned), and the fake cuptiActivityGetNextRecord that
// walks them. Used by the decoder's tests, its seeded fuzz test and its libFuzzer entry point.
#ifndef GPUPRIO_TESTS_TRACER_CUPTI_RECORD_BUFFER_H_
#define GPUPRIO_TESTS_TRACER_CUPTI_RECORD_BUFFER_H_

#include <cupti_activity.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

namespace gpuprio_test {

inline size_t Aligned(size_t n) { return (n + 7) & ~size_t{7}; }

// Bytes a record of `kind` occupies before alignment: the real struct for the kinds gpuprio
// decodes; for any other value 8 to 128 bytes, varying with the kind (CUPTI's other records vary).
size_t RecordSize(uint32_t kind);

// cuptiActivityGetNextRecord over such a buffer: steps over the previous record by its kind's
// aligned RecordSize. Harsher than CUPTI: it also hands out a trailing record that valid_bytes cuts
// short (reading a record's kind only when its 4 bytes lie before valid_bytes).
CUptiResult FakeNextRecord(uint8_t* buffer, size_t valid_bytes, CUpti_Activity** record);

// Offsets of the records FakeNextRecord yields from buffer[0, valid_bytes).
std::vector<size_t> RecordOffsets(const uint8_t* buffer, size_t valid_bytes);

// The kind of the record at `offset`; none when its 4 bytes do not lie before valid_bytes.
std::optional<uint32_t> KindAt(const uint8_t* buffer, size_t valid_bytes, size_t offset);

class RecordBuffer {
 public:
  template <typename T>
  void Add(const T& record) {
    const size_t at = bytes_.size();
    bytes_.resize(at + Aligned(sizeof(T)));
    std::memcpy(bytes_.data() + at, &record, sizeof(T));
  }
  // A record of `kind` whose RecordSize(kind) bytes after the kind are `fill`.
  void AddRaw(uint32_t kind, uint8_t fill);
  uint8_t* data() { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// CUPTI's record kinds that gpuprio decodes (CUPTI_ACTIVITY_KIND_KERNEL shares the concurrent
// kernel's layout).
inline constexpr CUpti_ActivityKind kDecodedKinds[] = {
    CUPTI_ACTIVITY_KIND_RUNTIME,
    CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_KERNEL,
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_OVERHEAD,
};
bool IsDecodedKind(uint32_t kind);
bool IsKernelKind(uint32_t kind);

// Where a kernel record keeps its name pointer.
inline constexpr size_t kKernelNameOffset = offsetof(CUpti_ActivityKernel10, name);

}  // namespace gpuprio_test

#endif  // GPUPRIO_TESTS_TRACER_CUPTI_RECORD_BUFFER_H_
