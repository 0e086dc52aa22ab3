// libcupti, reached only through dlopen/dlsym so that libgpuprio.so never has a DT_NEEDED on it.
//
// Contents:
//   CuptiApi             the function table the tracer uses (every entry resolved, or no table).
//   CuptiSearchPaths()   the order in which LoadCuptiLibrary looks for libcupti (pure, testable).
//   LoadCuptiLibrary()   dlopen + dlsym of the whole table, for GPUPRIO_TRACE.
//   FindLoadedCupti()    RTLD_NOLOAD only: the library if some other code already loaded it.
//
// A handle, once opened, is never closed: CUPTI may call back into us until the process ends.
// Nothing here calls into CUPTI; loading has no side effect beyond dlopen.
#ifndef GPUPRIO_CUPTI_TRACER_CUPTI_LIBRARY_H_
#define GPUPRIO_CUPTI_TRACER_CUPTI_LIBRARY_H_

#include <cupti.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuprio::tracer {

// Every CUPTI function gpuprio calls. Each pointer is non-null in a table LoadCuptiLibrary returns.
struct CuptiApi {
  void* handle = nullptr;
  std::string path;  // what dlopen was given ("libcupti.so.13", or a path)

  CUptiResult (*get_result_string)(CUptiResult, const char**) = nullptr;
  CUptiResult (*get_timestamp)(uint64_t*) = nullptr;
  CUptiResult (*set_thread_id_type)(CUpti_ActivityThreadIdType) = nullptr;
  CUptiResult (*subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) = nullptr;
  CUptiResult (*unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*enable_domain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain) = nullptr;
  CUptiResult (*get_callback_name)(CUpti_CallbackDomain, uint32_t, const char**) = nullptr;
  CUptiResult (*activity_enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*activity_disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*activity_register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                             CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*activity_get_next_record)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*activity_get_num_dropped_records)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult (*activity_flush_all)(uint32_t) = nullptr;
  CUptiResult (*activity_push_external_correlation_id)(CUpti_ExternalCorrelationKind,
                                                       uint64_t) = nullptr;
  CUptiResult (*activity_pop_external_correlation_id)(CUpti_ExternalCorrelationKind,
                                                      uint64_t*) = nullptr;
  // Optional (null when the library lacks them): per-API control of API records and callbacks.
  CUptiResult (*activity_enable_runtime_api)(CUpti_CallbackId, uint8_t) = nullptr;
  CUptiResult (*activity_enable_driver_api)(CUpti_CallbackId, uint8_t) = nullptr;
  CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                 CUpti_CallbackId) = nullptr;

  // "CUPTI_ERROR_..." text for `result` (falls back to the number).
  std::string ErrorString(CUptiResult result) const;
};

// GPUPRIO_CUPTI_LIBRARY (`override_path`, if non-empty, and then only it), else "libcupti.so.13"
// (the loader's search path; PyTorch's wheel copy is found when already loaded), then
// /usr/local/cuda/lib64 and /usr/local/cuda/extras/CUPTI/lib64.
std::vector<std::string> CuptiSearchPaths(const std::string& override_path);

// Tries each search path, RTLD_NOLOAD first (prefer the copy already in the process), then a
// real dlopen. NotFound lists every attempt and dlerror(); Unavailable names a missing symbol.
// The returned table is leaked on purpose (see the file comment).
absl::StatusOr<const CuptiApi*> LoadCuptiLibrary(const std::string& override_path);

// The two external-correlation functions of a libcupti already loaded in the process, found with
// dlopen(RTLD_NOLOAD) only (never loads anything). Null pointers when libcupti is not loaded.
struct ExternalIdFunctions {
  CUptiResult (*push)(CUpti_ExternalCorrelationKind, uint64_t) = nullptr;
  CUptiResult (*pop)(CUpti_ExternalCorrelationKind, uint64_t*) = nullptr;
  bool ok() const { return push != nullptr && pop != nullptr; }
};
ExternalIdFunctions FindLoadedCupti();

}  // namespace gpuprio::tracer

#endif  // GPUPRIO_CUPTI_TRACER_CUPTI_LIBRARY_H_
