// An execution log in device memory built on the fake's append_u32 kernel (log[1 + log[0]++] =
// value, when the kernel runs). Writers put (writer, tag, sequence number) in each value, so the
// log read back shows which of their launches ran, how often, and in which order.
#ifndef GPUPRIO_TESTS_SCHEDULER_APPEND_LOG_H_
#define GPUPRIO_TESTS_SCHEDULER_APPEND_LOG_H_

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/fake_cuda/clients/client_check.h"
#include "tests/scheduler/client_support.h"

namespace sched_client {

class AppendLog {
 public:
  // Values: writer (8 bits), tag (8 bits: e.g. a round number, so a stale value is caught),
  // sequence number (16 bits).
  static constexpr uint32_t kMaxWriters = 256;
  static constexpr uint32_t kMaxSequence = 1u << 16;

  static uint32_t Encode(uint32_t writer, uint32_t tag, uint32_t sequence) {
    return writer << 24 | (tag & 0xff) << 16 | sequence;
  }

  AppendLog() = default;
  // Room for `capacity` values.
  explicit AppendLog(size_t capacity)
      : capacity_(capacity), device_(Alloc((capacity + 1) * sizeof(uint32_t))) {}

  CUdeviceptr device() const { return device_; }

  // Launches append_u32(log, value) on `stream` (cuLaunchKernel); returns the launch's result.
  CUresult Append(CUfunction append, CUstream stream, uint32_t value) const {
    CUdeviceptr log = device_;
    void* args[] = {&log, &value};
    return cuLaunchKernel(append, 1, 1, 1, 1, 1, 1, 0, stream, args, nullptr);
  }

  // What the log holds compared with what was launched.
  struct Verdict {
    uint64_t entries = 0;       // values in the log
    uint64_t missing = 0;       // launched sequence numbers absent from the log
    uint64_t duplicated = 0;    // values present more than once
    uint64_t out_of_order = 0;  // values whose sequence number is below their writer's previous
    uint64_t foreign = 0;       // values of an unknown writer, a wrong tag or beyond `launched`
    std::string first_problem;  // empty when all counts above are zero

    bool ok() const { return missing + duplicated + out_of_order + foreign == 0; }
  };

  // Reads the log back (synchronous copy) and compares it with `launched[w]`: writer w launched
  // sequence numbers 0 .. launched[w]-1 with `tag`, in that order.
  Verdict Check(const std::vector<uint32_t>& launched, uint32_t tag) const {
    const uint32_t count = ReadBack(device_, 1)[0];
    Verdict v;
    if (count > capacity_) {
      v.foreign = 1;
      v.first_problem = "the log holds more values than it has room for";
      return v;
    }
    const std::vector<uint32_t> values = ReadBack(device_, count + 1);
    std::vector<std::vector<uint8_t>> seen(launched.size());
    for (size_t w = 0; w < launched.size(); ++w) seen[w].assign(launched[w], 0);
    std::vector<int64_t> last(launched.size(), -1);
    auto problem = [&v](const std::string& what) {
      if (v.first_problem.empty()) v.first_problem = what;
    };
    for (uint32_t i = 0; i < count; ++i) {
      const uint32_t value = values[1 + i];
      const uint32_t w = value >> 24, t = (value >> 16) & 0xff, seq = value & 0xffff;
      const std::string at = "entry " + std::to_string(i) + " (writer " + std::to_string(w) +
                             ", sequence " + std::to_string(seq) + ")";
      if (w >= launched.size() || t != (tag & 0xff) || seq >= launched[w]) {
        ++v.foreign;
        problem(at + ": not launched with tag " + std::to_string(tag & 0xff));
        continue;
      }
      if (seen[w][seq]++ != 0) {
        ++v.duplicated;
        problem(at + ": ran more than once");
      }
      if (static_cast<int64_t>(seq) < last[w]) {
        ++v.out_of_order;
        problem(at + ": ran after sequence " + std::to_string(last[w]));
      }
      last[w] = seq;
    }
    for (size_t w = 0; w < launched.size(); ++w) {
      for (uint32_t seq = 0; seq < launched[w]; ++seq) {
        if (seen[w][seq] == 0) {
          ++v.missing;
          problem("writer " + std::to_string(w) + " sequence " + std::to_string(seq) +
                  " never ran");
        }
      }
    }
    v.entries = count;
    return v;
  }

  // Empties the log (synchronous).
  void Clear() const {
    fake_client::CheckCu(cuMemsetD32(device_, 0, 1), "cuMemsetD32 (log count)");
  }

 private:
  size_t capacity_ = 0;
  CUdeviceptr device_ = 0;
};

}  // namespace sched_client

#endif  // GPUPRIO_TESTS_SCHEDULER_APPEND_LOG_H_
