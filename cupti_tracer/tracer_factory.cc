#include "cupti_tracer/tracer_factory.h"

#include <csignal>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cupti_tracer/cupti_library.h"
#include "cupti_tracer/cupti_tracer.h"
#include "cupti_tracer/external_id_carrier.h"
#include "cupti_tracer/nvtx_annotator.h"
#include "cupti_tracer/trace_file.h"
#include "cupti_tracer/trace_on_signal.h"
#include "cupti_tracer/trace_path_pattern.h"
#include "scheduler/base/env_vars.h"
#include "scheduler/base/logging.h"

namespace gpuprio::tracer {
namespace {

// How long SIGTERM/SIGINT may wait for the trace before the process ends without it (a wedged
// driver must not keep a stopped server alive; container runtimes wait 10-30 s before SIGKILL).
constexpr absl::Duration kSignalFinishBound = absl::Seconds(5);

std::unique_ptr<scheduler::OpObserver> FallBackToNvtx(const TracerConfig& config,
                                                      absl::string_view why) {
  Logf(LogLevel::kWarning,
       "GPUPRIO_TRACE=\"%s\": %s; no trace file will be written, gpuprio adds NVTX ranges for "
       "the tool that holds CUPTI instead",
       Escaped(config.path), why);
  return std::make_unique<NvtxAnnotator>();
}

}  // namespace

std::unique_ptr<scheduler::OpObserver> MakeTracer(const TracerConfig& unexpanded) {
  TracerConfig config = unexpanded;
  if (!config.path.empty()) {
    // Once, here: the process that starts tracing names its file (an exec'd child loads gpuprio
    // again and expands the pattern with its own pid; a forked child records no trace).
    ExpandedTracePath expanded =
        ExpandTracePath(config.path, CurrentTracePathContext(), GpuprioGetenv);
    for (const std::string& warning : expanded.warnings) Log(LogLevel::kWarning, warning);
    config.path = std::move(expanded.path);
  }
  if (config.path.empty()) {
    // Kineto compatibility only: nothing to do unless some component already loaded libcupti.
    if (!FindLoadedCupti().ok()) return nullptr;
    return std::make_unique<KinetoCarrier>();
  }
  // Said now rather than after the run: a trace that cannot be written is not recorded.
  if (absl::Status target = CheckTraceFileTarget(config.path); !target.ok()) {
    Logf(LogLevel::kError, "GPUPRIO_TRACE=\"%s\": %s; no trace will be written",
         Escaped(config.path), target.message());
    TracerConfig untraced = config;
    untraced.path.clear();
    return MakeTracer(untraced);
  }
  absl::StatusOr<const CuptiApi*> api = LoadCuptiLibrary(config.cupti_library);
  if (!api.ok()) return FallBackToNvtx(config, api.status().message());
  CuptiTracerOptions options;
  options.path = config.path;
  options.max_bytes = config.max_bytes;
  options.all_apis = config.all_apis;
  options.window = config.window;
  absl::StatusOr<std::unique_ptr<CuptiTracer>> tracer = CuptiTracer::Start(**api, options);
  if (!tracer.ok()) return FallBackToNvtx(config, tracer.status().message());
  const std::vector<int> signals =
      FinishOnTerminatingSignals(&FinishTracerAtExit, &RemovePendingTemporary, kSignalFinishBound);
  std::string on_signal;
  for (int signo : signals) {
    absl::StrAppend(&on_signal, on_signal.empty() ? "; on " : " and ",
                    signo == SIGTERM ? "SIGTERM" : "SIGINT");
  }
  if (!on_signal.empty()) absl::StrAppend(&on_signal, " it is written before the process ends");
  Logf(LogLevel::kInfo, "tracing to \"%s\" with %s (CUPTI)%s", Escaped(config.path),
       Escaped((*api)->path), on_signal);
  return *std::move(tracer);
}

std::unique_ptr<scheduler::OpObserver> MakeTracerFromEnvironment() {
  return MakeTracer(ReadTracerConfig(GpuprioGetenv));
}

void FinishTracerAtExit() {
  // Finish logs its own outcome; nothing here may take the program down.
  (void)CuptiTracer::FinishActive();
}

}  // namespace gpuprio::tracer
