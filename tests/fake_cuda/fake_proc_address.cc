// cuGetProcAddress (11030 ABI) and cuGetProcAddress_v2 (12000 ABI) of the fake driver, driven
// by the one table in proc_table.inc.
#include <cstring>

#include "tests/fake_cuda/call_log.h"
#include "tests/fake_cuda/driver_abi.h"

namespace fakecuda {
namespace {

struct ProcRow {
  const char* name;
  int version;
  void* legacy;
  void* per_thread;  // nullptr where the driver has no _ptsz/_ptds variant
};

// Taking these addresses inside the library binds to the fake's own definitions (the .so is
// linked with -Bsymbolic), never to an LD_PRELOADed interposer of the same name.
#define FAKECUDA_PROC(name, version, symbol) {#name, version, reinterpret_cast<void*>(&symbol), nullptr},
#define FAKECUDA_PROC_PT(name, version, symbol, pt_symbol) \
  {#name, version, reinterpret_cast<void*>(&symbol), reinterpret_cast<void*>(&pt_symbol)},
const ProcRow kProcTable[] = {
#include "tests/fake_cuda/proc_table.inc"
};
#undef FAKECUDA_PROC
#undef FAKECUDA_PROC_PT

CUresult Resolve(const char* symbol, void** pfn, int version, cuuint64_t flags,
                 CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (flags > (CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ||
      flags == (CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  *pfn = nullptr;
  const ProcRow* best = nullptr;
  bool name_found = false;
  for (const ProcRow& row : kProcTable) {
    if (std::strcmp(row.name, symbol) != 0) continue;
    name_found = true;
    if (row.version <= version && (best == nullptr || row.version > best->version)) best = &row;
  }
  if (best == nullptr) {
    if (status != nullptr) {
      *status = name_found ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                           : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    return CUDA_ERROR_NOT_FOUND;
  }
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  *pfn = per_thread && best->per_thread != nullptr ? best->per_thread : best->legacy;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace fakecuda

extern "C" {

CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return fakecuda::RunApi("cuGetProcAddress", [&](fakecuda::CallScope&) {
    return fakecuda::Resolve(symbol, pfn, version, flags, nullptr);
  });
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  return fakecuda::RunApi("cuGetProcAddress_v2", [&](fakecuda::CallScope&) {
    return fakecuda::Resolve(symbol, pfn, version, flags, status);
  });
}

}  // extern "C"
