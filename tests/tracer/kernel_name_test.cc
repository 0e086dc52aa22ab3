// Tests of cupti_tracer/kernel_name and of its use in the Chrome trace: real mangled kernel names
// (nvcc, PyTorch) become what torch.profiler shows; the mangled name stays in args.mangled.
#include "cupti_tracer/kernel_name.h"

#include <string>

#include "catch2/catch.hpp"
#include "cupti_tracer/chrome_trace_writer.h"
#include "nlohmann/json.hpp"
#include "tests/tracer/synthetic_trace.h"

namespace gpuprio::tracer {
namespace {

constexpr char kPlainMangled[] = "_Z10add_kernelPfS_i";
constexpr char kTorchMangled[] =
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5ArrayIPcLi1E"
    "EEEEviT0_T1_";
constexpr char kTorchDemangled[] =
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
    "at::detail::Array<char*, 1>)";

TEST_CASE("Mangled kernel names demangle as torch.profiler shows them", "[tracer]") {
  CHECK(DemangledKernelName(kPlainMangled) == "add_kernel(float*, float*, int)");
  CHECK(DemangledKernelName(kTorchMangled) == kTorchDemangled);
}

TEST_CASE("Names that are not mangled are kept as they are", "[tracer]") {
  for (const char* name : {"ampere_sgemm_128x64_nn", "kernel", "i", "", "_Zfoo", "_Z"}) {
    INFO(name);
    CHECK(DemangledKernelName(name) == name);
  }
}

TEST_CASE("The trace names kernels demangled and keeps the mangled name in args", "[tracer]") {
  TraceInput input = gpuprio_test::Scenario();
  REQUIRE(input.gpu_activities.size() >= 3);
  int kernels = 0;
  for (GpuActivity& gpu : input.gpu_activities) {
    if (gpu.kind != GpuActivity::Kind::kKernel) continue;
    gpu.name = kernels % 3 == 0 ? kTorchMangled : kernels % 3 == 1 ? kPlainMangled : "plain_c";
    ++kernels;
  }
  REQUIRE(kernels >= 3);
  const nlohmann::json trace = nlohmann::json::parse(ChromeTraceJson(input));
  int torch = 0, plain = 0, unmangled = 0;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X" || e.value("cat", "") != "kernel") continue;
    const nlohmann::json& args = e.at("args");
    if (e.at("name") == kTorchDemangled) {
      ++torch;
      CHECK(args.at("mangled") == kTorchMangled);
    } else if (e.at("name") == "add_kernel(float*, float*, int)") {
      ++plain;
      CHECK(args.at("mangled") == kPlainMangled);
    } else {
      CHECK(e.at("name") == "plain_c");
      CHECK_FALSE(args.contains("mangled"));
      ++unmangled;
    }
  }
  CHECK(torch + plain + unmangled == kernels);
  CHECK(torch > 0);
  CHECK(plain > 0);
  CHECK(unmangled > 0);
}

}  // namespace
}  // namespace gpuprio::tracer
