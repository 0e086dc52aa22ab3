#include "cupti_tracer/activity_decoder.h"

#include <cupti_activity.h>

#include <string>

#include "catch2/catch.hpp"
#include "tests/tracer/cupti_record_buffer.h"

namespace gpuprio::tracer {
namespace {

using gpuprio_test::FakeNextRecord;
using gpuprio_test::RecordBuffer;

TEST_CASE("Runtime API names lose their version suffix, driver names keep theirs", "[tracer]") {
  CHECK(StripRuntimeVersionSuffix("cudaLaunchKernel_v7000") == "cudaLaunchKernel");
  CHECK(StripRuntimeVersionSuffix("cudaLaunchKernel_ptsz_v7000") == "cudaLaunchKernel_ptsz");
  CHECK(StripRuntimeVersionSuffix("cudaMalloc") == "cudaMalloc");
  CHECK(StripRuntimeVersionSuffix("cuda_vx") == "cuda_vx");
  ApiNameTable names;
  names.Set(ApiCall::Kind::kRuntime, 211, "cudaLaunchKernel_v7000");
  names.Set(ApiCall::Kind::kDriver, 307, "cuLaunchKernel");
  names.Set(ApiCall::Kind::kDriver, 279, "cuMemcpyHtoD_v2");
  CHECK(names.Name(ApiCall::Kind::kRuntime, 211) == "cudaLaunchKernel");
  CHECK(names.Name(ApiCall::Kind::kDriver, 307) == "cuLaunchKernel");
  CHECK(names.Name(ApiCall::Kind::kDriver, 279) == "cuMemcpyHtoD_v2");
  CHECK(names.Name(ApiCall::Kind::kDriver, 5) == "cu api 5");
  CHECK(names.Name(ApiCall::Kind::kRuntime, 9999) == "cuda api 9999");
}

TEST_CASE("DecodeActivityBuffer decodes every record kind gpuprio enables", "[tracer]") {
  ApiNameTable names;
  names.Set(ApiCall::Kind::kRuntime, 211, "cudaLaunchKernel_v7000");
  names.Set(ApiCall::Kind::kDriver, 307, "cuLaunchKernel");
  RecordBuffer buffer;

  CUpti_ActivityAPI runtime = {};
  runtime.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  runtime.cbid = 211;
  runtime.start = 1000;
  runtime.end = 1500;
  runtime.processId = 42;
  runtime.threadId = 4242;
  runtime.correlationId = 7;
  buffer.Add(runtime);

  CUpti_ActivityAPI driver = runtime;
  driver.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  driver.cbid = 307;
  driver.threadId = 5151;
  driver.correlationId = 8;
  driver.start = 2000;
  driver.end = 2100;
  buffer.Add(driver);

  // The name lives in memory that is gone after decoding: the decoder must copy it.
  std::string kernel_name = "void gemm<float>(int)";
  CUpti_ActivityKernel10 kernel = {};
  kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  kernel.start = 3000;
  kernel.end = 9000;
  kernel.deviceId = 1;
  kernel.contextId = 2;
  kernel.streamId = 13;
  kernel.correlationId = 8;
  kernel.name = kernel_name.c_str();
  buffer.Add(kernel);

  CUpti_ActivityMemcpy6 memcpy_record = {};
  memcpy_record.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  memcpy_record.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  memcpy_record.bytes = 4096;
  memcpy_record.start = 9100;
  memcpy_record.end = 9200;
  memcpy_record.streamId = 14;
  memcpy_record.correlationId = 9;
  buffer.Add(memcpy_record);

  CUpti_ActivityMemset4 memset_record = {};
  memset_record.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  memset_record.bytes = 512;
  memset_record.start = 9300;
  memset_record.end = 9350;
  memset_record.streamId = 15;
  memset_record.correlationId = 10;
  buffer.Add(memset_record);

  CUpti_ActivityExternalCorrelation external = {};
  external.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  external.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
  external.externalId = 123456789012345ull;
  external.correlationId = 8;
  buffer.Add(external);

  CUpti_ActivitySynchronization2 sync = {};
  sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  sync.start = 9400;
  sync.end = 9800;
  sync.correlationId = 11;
  sync.streamId = 13;
  buffer.Add(sync);

  CUpti_ActivityOverhead3 overhead = {};
  overhead.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  overhead.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
  overhead.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  overhead.objectId.pt.processId = 42;
  overhead.objectId.pt.threadId = 4242;
  overhead.start = 9900;
  overhead.end = 9950;
  buffer.Add(overhead);

  buffer.AddRaw(CUPTI_ACTIVITY_KIND_MARKER, 0);  // not enabled by gpuprio: counted, skipped

  DecodedActivity out;
  const uint64_t decoded =
      DecodeActivityBuffer(buffer.data(), buffer.size(), &FakeNextRecord, names, &out);
  kernel_name.assign(kernel_name.size(), 'x');

  CHECK(decoded == 8);
  CHECK(out.records == 9);
  CHECK(out.unknown_records == 1);
  REQUIRE(out.api_calls.size() == 2);
  CHECK(out.api_calls[0].kind == ApiCall::Kind::kRuntime);
  CHECK(out.api_calls[0].name == "cudaLaunchKernel");
  CHECK(out.api_calls[0].cbid == 211);
  CHECK(out.api_calls[0].correlation_id == 7);
  CHECK(out.api_calls[0].pid == 42);
  CHECK(out.api_calls[0].tid == 4242);
  CHECK(out.api_calls[0].start_ns == 1000);
  CHECK(out.api_calls[0].end_ns == 1500);
  CHECK(out.api_calls[1].kind == ApiCall::Kind::kDriver);
  CHECK(out.api_calls[1].name == "cuLaunchKernel");
  CHECK(out.api_calls[1].tid == 5151);

  REQUIRE(out.gpu_activities.size() == 3);
  const GpuActivity& k = out.gpu_activities[0];
  CHECK(k.kind == GpuActivity::Kind::kKernel);
  CHECK(k.name == "void gemm<float>(int)");
  CHECK(k.device_id == 1);
  CHECK(k.context_id == 2);
  CHECK(k.stream_id == 13);
  CHECK(k.correlation_id == 8);
  CHECK(k.start_ns == 3000);
  CHECK(k.end_ns == 9000);
  const GpuActivity& m = out.gpu_activities[1];
  CHECK(m.kind == GpuActivity::Kind::kMemcpy);
  CHECK(m.name == "Memcpy HtoD");
  CHECK(m.bytes == 4096);
  CHECK(m.stream_id == 14);
  const GpuActivity& s = out.gpu_activities[2];
  CHECK(s.kind == GpuActivity::Kind::kMemset);
  CHECK(s.name == "Memset");
  CHECK(s.bytes == 512);

  REQUIRE(out.external_correlations.size() == 1);
  CHECK(out.external_correlations[0].kind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2);
  CHECK(out.external_correlations[0].external_id == 123456789012345ull);
  CHECK(out.external_correlations[0].correlation_id == 8);

  REQUIRE(out.synchronizations.size() == 1);
  CHECK(out.synchronizations[0].type == "stream");
  CHECK(out.synchronizations[0].correlation_id == 11);
  CHECK(out.synchronizations[0].end_ns == 9800);

  REQUIRE(out.overheads.size() == 1);
  CHECK(out.overheads[0].name == "CUPTI buffer flush");
  CHECK(out.overheads[0].tid == 4242);

  CHECK(out.ApproximateBytes() >= 2 * sizeof(ApiCall) + 3 * sizeof(GpuActivity));
}

TEST_CASE("DecodeActivityBuffer handles an empty buffer and a null kernel name", "[tracer]") {
  ApiNameTable names;
  DecodedActivity out;
  CHECK(DecodeActivityBuffer(nullptr, 0, &FakeNextRecord, names, &out) == 0);
  RecordBuffer buffer;
  CUpti_ActivityKernel10 kernel = {};
  kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  buffer.Add(kernel);
  CHECK(DecodeActivityBuffer(buffer.data(), buffer.size(), &FakeNextRecord, names, &out) == 1);
  REQUIRE(out.gpu_activities.size() == 1);
  CHECK(out.gpu_activities[0].name == "kernel");
}

TEST_CASE("DecodedActivity::Append moves every record over", "[tracer]") {
  DecodedActivity a;
  DecodedActivity b;
  a.api_calls.resize(2);
  b.api_calls.resize(3);
  b.gpu_activities.resize(1);
  b.records = 4;
  a.records = 2;
  a.Append(std::move(b));
  CHECK(a.api_calls.size() == 5);
  CHECK(a.gpu_activities.size() == 1);
  CHECK(a.records == 6);
  CHECK(b.records == 0);
  CHECK(b.api_calls.empty());
}

}  // namespace
}  // namespace gpuprio::tracer
