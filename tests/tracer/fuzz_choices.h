// Test support: where a fuzzer's decisions come from. The Catch2 fuzz tests draw them from a
// seeded PRNG (a failure names its seed and replays exactly); the libFuzzer entry points draw them
// from the input bytes, and once those run out from a PRNG seeded with a hash of the input. So
// every input is a complete case and the same input is always the same case; libFuzzer steers
// the first decisions by coverage, and the rest vary as widely as the seeded tests' (zeros there
// would pin every later value to its first choice, and UB that no branch leads to, like an
// overflow at a timestamp edge, would never be reached).
#ifndef GPUPRIO_TESTS_TRACER_FUZZ_CHOICES_H_
#define GPUPRIO_TESTS_TRACER_FUZZ_CHOICES_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <random>

namespace gpuprio_test {

// Sanitizers slow the fuzz tests' loops 5-20x; the tests divide their iteration counts by this so
// each stays within seconds under ASan and TSan too.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr int kSanitizerSlowdown = 8;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr int kSanitizerSlowdown = 8;
#else
inline constexpr int kSanitizerSlowdown = 1;
#endif
#else
inline constexpr int kSanitizerSlowdown = 1;
#endif

class Choices {
 public:
  explicit Choices(uint64_t seed) : rng_(seed) {}
  Choices(const uint8_t* data, size_t size)
      : rng_(Fnv1a(data, size)), data_(data), size_(size), from_bytes_(true) {}

  // A value in [0, n); n == 0 is taken as 1. From bytes: as few bytes as n needs.
  uint64_t Below(uint64_t n) {
    if (n <= 1) return 0;
    if (!from_bytes_ || pos_ >= size_) return rng_() % n;
    uint64_t value = 0;
    for (uint64_t range = n - 1; range != 0; range >>= 8) {
      value = (value << 8) | (pos_ < size_ ? data_[pos_++] : 0);
    }
    return value % n;
  }
  bool OneIn(uint64_t n) { return Below(n) == 0; }
  template <typename T>
  T Pick(std::initializer_list<T> values) {
    return values.begin()[Below(values.size())];
  }

 private:
  static uint64_t Fnv1a(const uint8_t* data, size_t size) {
    uint64_t hash = 14695981039346656037ull;
    for (size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 1099511628211ull;
    return hash;
  }

  std::mt19937_64 rng_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t pos_ = 0;
  bool from_bytes_ = false;
};

}  // namespace gpuprio_test

#endif  // GPUPRIO_TESTS_TRACER_FUZZ_CHOICES_H_
