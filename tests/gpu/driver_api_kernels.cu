// Device code for driver_api_program.cu. build_artifacts.sh compiles this file alone to a fatbin
// (sm_90 SASS + compute_90 PTX), and embeds the image in the program, which loads it with
// cuModuleLoadData and launches it only through the driver API.

extern "C" __global__ void gp_fill(float* p, float value, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = value;
}

extern "C" __global__ void gp_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

// Mixed parameter sizes (4, 4, 8, 8 bytes), so a launch that packs or copies the parameters
// wrongly shows up in the results.
extern "C" __global__ void gp_axpy(int n, float alpha, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = y[i] + alpha * x[i];
}
