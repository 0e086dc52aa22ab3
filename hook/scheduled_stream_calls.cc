#include "hook/scheduled_stream_calls.h"

#include "hook/real_driver.h"

namespace gpuprio::hook {

bool IsPageableHostMemory(const void* p) {
  const auto get_attribute = DriverHelper<HelperId::k_cuPointerGetAttribute>();
  if (p == nullptr || get_attribute == nullptr) return p != nullptr;
  unsigned int memory_type = 0;
  DriverCallScope in_driver;
  // The driver knows device memory, pinned and registered host memory; anything else is
  // pageable host memory (the driver answers CUDA_ERROR_INVALID_VALUE for it).
  return get_attribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                       reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS;
}

}  // namespace gpuprio::hook
