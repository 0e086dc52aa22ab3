// Test helper: counts operator new calls made by the current thread (the test binary links a
// replacement operator new that counts), to check that code claimed not to allocate does not.
#ifndef GPUPRIO_TESTS_ALLOCATION_COUNTER_H_
#define GPUPRIO_TESTS_ALLOCATION_COUNTER_H_

#include <cstdint>

namespace gpuprio_test {

// operator new calls on this thread so far.
uint64_t ThreadAllocations();

// Allocations by this thread between construction and count().
class AllocationCounter {
 public:
  AllocationCounter() : start_(ThreadAllocations()) {}
  uint64_t count() const { return ThreadAllocations() - start_; }

 private:
  uint64_t start_;
};

}  // namespace gpuprio_test

#endif  // GPUPRIO_TESTS_ALLOCATION_COUNTER_H_
