#define CATCH_CONFIG_MAIN
#include "catch2/catch.hpp"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include <cuda.h>
TEST_CASE("smoke") { absl::Mutex mu; absl::MutexLock l(&mu); CHECK(absl::StrFormat("%d", CUDA_VERSION) == "13000"); }
