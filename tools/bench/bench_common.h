// What the CUDA benchmark programs (interference.cu, launch_rate.cu) share: CUDA error text, JSON
// string escaping, a nearest-rank percentile, the command-line walk, and what the environment says
// about gpuprio (preloaded, mode). Header only: each program is one nvcc command (build_artifacts.sh).
#ifndef GPUPRIO_TOOLS_BENCH_BENCH_COMMON_H_
#define GPUPRIO_TOOLS_BENCH_BENCH_COMMON_H_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace gp_bench {

inline std::string rt_error(const char* what, cudaError_t e) {
  return std::string(what) + " failed: " + cudaGetErrorName(e) + " (" + std::to_string((int)e) + ")";
}

inline std::string json_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') { out += '\\'; out += ch; }
    else if ((unsigned char)ch < 0x20) { char buf[8]; std::snprintf(buf, sizeof buf, "\\u%04x", ch); out += buf; }
    else out += ch;
  }
  return out;
}

// Nearest rank (the Python reports use the same rule, so their pooled figures match these).
inline double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  size_t k = (size_t)(q * (double)(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

// Walks "--flag value" pairs: `while (args.next()) { if (args.is("--x")) x = args.num(); ... else
// args.bad(); }`. A flag without its value, or an unknown flag, calls usage (which exits).
class Args {
 public:
  Args(int argc, char** argv, void (*usage)(const char*)) : argc_(argc), argv_(argv), usage_(usage) {}
  bool next() { return ++i_ < argc_; }
  bool is(const char* flag) const { return std::strcmp(argv_[i_], flag) == 0; }
  const char* str() {
    if (i_ + 1 >= argc_) usage_(argv_[0]);
    return argv_[++i_];
  }
  double num() { return std::atof(str()); }
  long integer() { return std::atol(str()); }
  void bad() const { usage_(argv_[0]); }

 private:
  int argc_;
  char** argv_;
  void (*usage_)(const char*);
  int i_ = 0;
};

// What the reports check a run against: was libgpuprio.so preloaded, and in which GPUPRIO_MODE.
struct GpuprioEnv {
  bool preloaded = false;
  std::string mode;
};

inline GpuprioEnv gpuprio_env() {
  GpuprioEnv env;
  const char* mode = std::getenv("GPUPRIO_MODE");
  const char* preload = std::getenv("LD_PRELOAD");
  env.preloaded = preload && std::strstr(preload, "gpuprio");
  env.mode = mode ? mode : "";
  return env;
}

}  // namespace gp_bench

#endif  // GPUPRIO_TOOLS_BENCH_BENCH_COMMON_H_
