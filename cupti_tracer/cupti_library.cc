#include "cupti_tracer/cupti_library.h"

#include <dlfcn.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpuprio::tracer {
namespace {

constexpr char kSoname[] = "libcupti.so.13";

std::string DlError() {
  const char* error = dlerror();
  return error != nullptr ? error : "unknown dlopen error";
}

template <typename Fn>
bool Resolve(void* handle, const char* name, Fn& fn, std::string* missing) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (fn == nullptr && missing->empty()) *missing = name;
  return fn != nullptr;
}

}  // namespace

std::string CuptiApi::ErrorString(CUptiResult result) const {
  const char* text = nullptr;
  if (get_result_string != nullptr && get_result_string(result, &text) == CUPTI_SUCCESS &&
      text != nullptr) {
    return text;
  }
  return absl::StrCat("CUPTI error ", static_cast<int>(result));
}

std::vector<std::string> CuptiSearchPaths(const std::string& override_path) {
  if (!override_path.empty()) return {override_path};
  return {kSoname, "/usr/local/cuda/lib64/libcupti.so.13",
          "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"};
}

absl::StatusOr<const CuptiApi*> LoadCuptiLibrary(const std::string& override_path) {
  std::vector<std::string> attempts;
  void* handle = nullptr;
  std::string path;
  for (const std::string& candidate : CuptiSearchPaths(override_path)) {
    handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (handle == nullptr) handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      path = candidate;
      break;
    }
    attempts.push_back(DlError());
  }
  if (handle == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("cannot load libcupti (", absl::StrJoin(attempts, "; "), ")"));
  }
  auto* api = new CuptiApi;  // leaked: see the header
  api->handle = handle;
  api->path = path;
  std::string missing;
  Resolve(handle, "cuptiGetResultString", api->get_result_string, &missing);
  Resolve(handle, "cuptiGetTimestamp", api->get_timestamp, &missing);
  Resolve(handle, "cuptiSetThreadIdType", api->set_thread_id_type, &missing);
  Resolve(handle, "cuptiSubscribe", api->subscribe, &missing);
  Resolve(handle, "cuptiUnsubscribe", api->unsubscribe, &missing);
  Resolve(handle, "cuptiEnableDomain", api->enable_domain, &missing);
  Resolve(handle, "cuptiGetCallbackName", api->get_callback_name, &missing);
  Resolve(handle, "cuptiActivityEnable", api->activity_enable, &missing);
  Resolve(handle, "cuptiActivityDisable", api->activity_disable, &missing);
  Resolve(handle, "cuptiActivityRegisterCallbacks", api->activity_register_callbacks, &missing);
  Resolve(handle, "cuptiActivityGetNextRecord", api->activity_get_next_record, &missing);
  Resolve(handle, "cuptiActivityGetNumDroppedRecords", api->activity_get_num_dropped_records,
          &missing);
  Resolve(handle, "cuptiActivityFlushAll", api->activity_flush_all, &missing);
  Resolve(handle, "cuptiActivityPushExternalCorrelationId",
          api->activity_push_external_correlation_id, &missing);
  Resolve(handle, "cuptiActivityPopExternalCorrelationId",
          api->activity_pop_external_correlation_id, &missing);
  // Optional: absent from a library, the tracer records every API instead.
  api->activity_enable_runtime_api = reinterpret_cast<decltype(api->activity_enable_runtime_api)>(
      dlsym(handle, "cuptiActivityEnableRuntimeApi"));
  api->activity_enable_driver_api = reinterpret_cast<decltype(api->activity_enable_driver_api)>(
      dlsym(handle, "cuptiActivityEnableDriverApi"));
  api->enable_callback =
      reinterpret_cast<decltype(api->enable_callback)>(dlsym(handle, "cuptiEnableCallback"));
  if (!missing.empty()) {
    // The handle stays open (a library another component loaded must not be unloaded by us).
    std::string message = absl::StrCat(path, " lacks ", missing, " (CUPTI 13 is required)");
    delete api;
    return absl::UnavailableError(message);
  }
  return api;
}

ExternalIdFunctions FindLoadedCupti() {
  ExternalIdFunctions fns;
  void* handle = dlopen(kSoname, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (handle == nullptr) return fns;
  // dlopen(RTLD_NOLOAD) took a reference; it is never dropped, like every CUPTI handle here.
  fns.push = reinterpret_cast<decltype(fns.push)>(
      dlsym(handle, "cuptiActivityPushExternalCorrelationId"));
  fns.pop = reinterpret_cast<decltype(fns.pop)>(
      dlsym(handle, "cuptiActivityPopExternalCorrelationId"));
  if (!fns.ok()) fns = ExternalIdFunctions{};
  return fns;
}

}  // namespace gpuprio::tracer
