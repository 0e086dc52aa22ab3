// The fakecuda_* controls that act on the virtual devices (fake_cuda_control.h); the log
// getters live in call_log.cc.
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/synchronization/mutex.h"
#include "tests/fake_cuda/call_log.h"
#include "tests/fake_cuda/fake_cuda_control.h"
#include "tests/fake_cuda/fake_state.h"
#include "tests/fake_cuda/virtual_device.h"

using fakecuda::Mu;
using fakecuda::S;

extern "C" {

void fakecuda_reset(void) {
  {
    absl::MutexLock lock(&Mu());
    for (fakecuda::Device& dev : S().devices) dev.paused = false;
    fakecuda::WaitAllIdle();
    S().kernel_duration_ns.clear();
    S().kernel_failure.clear();
    for (auto& [handle, kind] : S().handles) {
      if (kind == fakecuda::Kind::kContext) {
        auto* ctx = static_cast<fakecuda::Context*>(const_cast<void*>(handle));
        ctx->pending_error = CUDA_SUCCESS;
        for (fakecuda::Stream* s : ctx->streams) s->pending_error = CUDA_SUCCESS;
      }
    }
  }
  fakecuda::ClearInjections();
  fakecuda::ClearLogs();
}

void fakecuda_set_kernel_duration_ns(const char* kernel_name, uint64_t ns) {
  absl::MutexLock lock(&Mu());
  S().kernel_duration_ns[kernel_name] = static_cast<int64_t>(ns);
}

void fakecuda_set_device_paused(int device, int paused) {
  absl::MutexLock lock(&Mu());
  if (device < 0 || device >= S().device_count) return;
  S().devices[device].paused = paused != 0;
}

void fakecuda_set_green_contexts(int enabled) {
  absl::MutexLock lock(&Mu());
  S().green_contexts = enabled != 0;
}

int fakecuda_mps_client_priority_at_init(char* out, uint64_t capacity) {
  absl::MutexLock lock(&Mu());
  if (!S().initialized || !S().mps_client_priority_set_at_init) return 0;
  if (out != nullptr && capacity > 0) {
    const std::string& value = S().mps_client_priority_at_init;
    const size_t n = std::min<size_t>(value.size(), capacity - 1);
    std::memcpy(out, value.data(), n);
    out[n] = '\0';
  }
  return 1;
}

void fakecuda_wait_idle(void) {
  absl::MutexLock lock(&Mu());
  fakecuda::WaitAllIdle();
}

void fakecuda_fail_kernel(const char* kernel_name, int result) {
  absl::MutexLock lock(&Mu());
  if (result == CUDA_SUCCESS) {
    S().kernel_failure.erase(kernel_name);
  } else {
    S().kernel_failure[kernel_name] = static_cast<CUresult>(result);
  }
}

void* fakecuda_self_dlsym(const char* name) {
  // The driver looking itself up, as libcuda does for its own entry points: an interposed dlsym
  // must hand the driver its own symbol, never a wrapper.
  void* self = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (self == nullptr) return nullptr;
  void* p = dlsym(self, name);
  dlclose(self);
  return p;
}

}  // extern "C"
