// cuGetProcAddress(_v2) of the fake behaves like the real driver's.
#include "tests/fake_cuda/driver_abi.h"

#include "catch2/catch.hpp"

namespace {

void* Lookup(const char* name, int version, cuuint64_t flags,
             CUdriverProcAddressQueryResult* status = nullptr, CUresult* result = nullptr) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult local;
  const CUresult r = cuGetProcAddress_v2(name, &p, version, flags, status ? status : &local);
  if (result != nullptr) *result = r;
  return p;
}

template <typename Fn>
void* Addr(Fn* f) { return reinterpret_cast<void*>(f); }

}  // namespace

TEST_CASE("cuGetProcAddress picks the newest ABI not newer than the version", "[proc_address]") {
  CHECK(Lookup("cuCtxSynchronize", 13000, 0) == Addr(&cuCtxSynchronize_v2));
  CHECK(Lookup("cuCtxSynchronize", 12000, 0) == Addr(&cuCtxSynchronize));
  CHECK(Lookup("cuGetProcAddress", 11030, 0) == Addr(&cuGetProcAddress));
  CHECK(Lookup("cuGetProcAddress", 12000, 0) == Addr(&cuGetProcAddress_v2));
  CHECK(Lookup("cuMemcpyHtoD", 13000, 0) == Addr(&cuMemcpyHtoD_v2));
  CHECK(Lookup("cuStreamGetCaptureInfo", 13000, 0) == Addr(&cuStreamGetCaptureInfo_v3));
  CHECK(Lookup("cuStreamGetCaptureInfo", 11030, 0) == Addr(&cuStreamGetCaptureInfo_v2));
  CHECK(Lookup("cuCtxCreate", 13000, 0) == Addr(&cuCtxCreate_v4));
  CHECK(Lookup("cuEventElapsedTime", 12000, 0) == Addr(&cuEventElapsedTime));
}

TEST_CASE("cuGetProcAddress returns per-thread variants only when asked", "[proc_address]") {
  SECTION("default and legacy flags give the legacy symbol") {
    CHECK(Lookup("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_DEFAULT) == Addr(&cuLaunchKernel));
    CHECK(Lookup("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM) ==
          Addr(&cuLaunchKernel));
  }
  SECTION("per-thread flag gives _ptsz / _ptds") {
    const cuuint64_t pt = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    CHECK(Lookup("cuLaunchKernel", 13000, pt) == Addr(&cuLaunchKernel_ptsz));
    CHECK(Lookup("cuMemcpyHtoDAsync", 13000, pt) == Addr(&cuMemcpyHtoDAsync_v2_ptsz));
    CHECK(Lookup("cuMemcpyHtoD", 13000, pt) == Addr(&cuMemcpyHtoD_v2_ptds));
    CHECK(Lookup("cuStreamWaitValue32", 13000, pt) == Addr(&cuStreamWaitValue32_v2_ptsz));
  }
  SECTION("symbols without a per-thread form are returned as they are") {
    CHECK(Lookup("cuStreamCreate", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ==
          Addr(&cuStreamCreate));
  }
}

TEST_CASE("cuGetProcAddress reports symbolStatus like the driver", "[proc_address]") {
  CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
  CUresult r = CUDA_SUCCESS;
  SECTION("the empty-name probe") {
    CHECK(Lookup("", 13000, 0, &status, &r) == nullptr);
    CHECK(r == CUDA_ERROR_NOT_FOUND);
    CHECK(status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  }
  SECTION("an unknown name") {
    CHECK(Lookup("cuNoSuchFunction", 13000, 0, &status, &r) == nullptr);
    CHECK(r == CUDA_ERROR_NOT_FOUND);
    CHECK(status == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  }
  SECTION("a version older than the symbol") {
    CHECK(Lookup("cuLibraryLoadData", 11080, 0, &status, &r) == nullptr);
    CHECK(r == CUDA_ERROR_NOT_FOUND);
    CHECK(status == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  }
  SECTION("success") {
    CHECK(Lookup("cuInit", 2000, 0, &status, &r) == Addr(&cuInit));
    CHECK(r == CUDA_SUCCESS);
    CHECK(status == CU_GET_PROC_ADDRESS_SUCCESS);
  }
  SECTION("invalid flags") {
    Lookup("cuInit", 13000, 4, &status, &r);
    CHECK(r == CUDA_ERROR_INVALID_VALUE);
  }
}

TEST_CASE("cuGetProcAddress v1 ABI takes four arguments", "[proc_address]") {
  void* p = nullptr;
  CHECK(cuGetProcAddress("cuLaunchKernel", &p, 13000,
                         CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) == CUDA_SUCCESS);
  CHECK(p == Addr(&cuLaunchKernel_ptsz));
  CHECK(cuGetProcAddress("", &p, 13000, 0) == CUDA_ERROR_NOT_FOUND);
}
