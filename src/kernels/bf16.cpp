// atto/kernels/bf16.cpp: bf16 mixed precision's machinery: which kernels this CPU runs (cpuid,
// the OS's register state, Linux's AMX permission), the precision scope, rounding to bf16,
// packing B for the kernels, and the weight cache. The kernels are in gemm_bf16.cpp.
#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "kernels/bf16_impl.h"
#include "kernels/kernels.h"
#include "kernels/parallel.h"

namespace atto::kernels {

namespace {

struct CpuFeatures {
  bool avx512 = false;       // AVX512F + BW + VL, and the OS saves the 512-bit state
  bool avx512_bf16 = false;  // vdpbf16ps
  bool amx = false;          // AMX-TILE + AMX-BF16, and Linux granted the tile data state
  std::string missing;       // for the error message
};

#if defined(__x86_64__)
uint64_t xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

// Linux keeps the AMX tile data (8 KiB per thread) off until a process asks for it.
bool request_amx_permission() {
  constexpr long kArchGetXcompPerm = 0x1022, kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) return false;
  unsigned long mask = 0;
  if (syscall(SYS_arch_prctl, kArchGetXcompPerm, &mask) != 0) return false;
  return (mask >> kXfeatureXtiledata) & 1;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) {  // OSXSAVE
    f.missing = "OSXSAVE";
    return f;
  }
  const uint64_t xcr0 = xgetbv0();
  const bool os_zmm = (xcr0 & 0xe6) == 0xe6;  // SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM
  __get_cpuid_count(7, 0, &a, &b, &c, &d);
  const bool avx512f = b & (1u << 16), avx512bw = b & (1u << 30), avx512vl = b & (1u << 31);
  const bool amx_bf16 = d & (1u << 22), amx_tile = d & (1u << 24);
  __get_cpuid_count(7, 1, &a, &b, &c, &d);
  const bool bf16 = a & (1u << 5);
  f.avx512 = avx512f && avx512bw && avx512vl && os_zmm;
  f.avx512_bf16 = f.avx512 && bf16;
  if (!f.avx512) f.missing = "AVX-512 (F, BW, VL)";
  if (f.avx512 && !bf16) f.missing = "AVX512_BF16";
  f.amx = f.avx512_bf16 && amx_bf16 && amx_tile && request_amx_permission();
  return f;
}
#else
// The bf16 kernels are x86-64's (AVX512_BF16, AMX); elsewhere (ARM64) bf16 is refused with the
// same message as on an x86 CPU without them (bf16_absent.cpp stands in for the kernel files).
CpuFeatures detect() {
  CpuFeatures f;
  f.missing = "an x86-64 CPU: atto's bf16 kernels are x86-64 only";
  return f;
}
#endif

const CpuFeatures& features() {
  static const CpuFeatures f = detect();
  return f;
}

Bf16Backend best_backend() {
  if (features().amx) return Bf16Backend::Amx;
  if (features().avx512_bf16) return Bf16Backend::Avx512Bf16;
  return Bf16Backend::None;
}

Bf16Backend backend_from_env() {
  const char* env = std::getenv("ATTO_BF16_KERNEL");
  if (env == nullptr || *env == '\0') return best_backend();
  const std::string name = env;
  Bf16Backend b;
  if (name == "amx") {
    b = Bf16Backend::Amx;
  } else if (name == "avx512bf16") {
    b = Bf16Backend::Avx512Bf16;
  } else {
    throw std::runtime_error("ATTO_BF16_KERNEL='" + name + "' is not a bf16 kernel: use amx or avx512bf16");
  }
  if (!bf16_supported(b))
    throw std::runtime_error("ATTO_BF16_KERNEL=" + name + ": this CPU (or kernel) cannot run it; unset it to use " +
                             bf16_backend_name(best_backend()));
  return b;
}

std::mutex g_backend_mutex;
bool g_backend_set = false;
Bf16Backend g_backend = Bf16Backend::None;

thread_local Precision t_precision = Precision::F32;
thread_local Bf16WeightCache* t_cache = nullptr;

}  // namespace

bool bf16_supported(Bf16Backend b) {
  switch (b) {
    case Bf16Backend::Amx: return features().amx;
    case Bf16Backend::Avx512Bf16: return features().avx512_bf16;
    case Bf16Backend::None: return true;
  }
  return false;
}

Bf16Backend bf16_backend() {
  std::lock_guard<std::mutex> lock(g_backend_mutex);
  if (!g_backend_set) {
    g_backend = backend_from_env();
    g_backend_set = true;
  }
  return g_backend;
}

Bf16Backend set_bf16_backend(Bf16Backend b) {
  if (!bf16_supported(b))
    throw std::runtime_error(std::string("bf16 kernel '") + bf16_backend_name(b) + "' cannot run on this CPU");
  const Bf16Backend previous = bf16_backend();
  std::lock_guard<std::mutex> lock(g_backend_mutex);
  g_backend = b;
  return previous;
}

const char* bf16_backend_name(Bf16Backend b) {
  switch (b) {
    case Bf16Backend::Amx: return "amx";
    case Bf16Backend::Avx512Bf16: return "avx512bf16";
    case Bf16Backend::None: return "none";
  }
  return "none";
}

void require_bf16(const char* what) {
  if (bf16_backend() != Bf16Backend::None) return;
  throw std::runtime_error(std::string(what) + ": this CPU has no bf16 arithmetic (missing " + features().missing +
                           "; needs AVX512_BF16, as on AMD Zen 4 or Intel Xeon 3rd generation and later, or AMX); "
                           "use --precision fp32");
}

const char* precision_name(Precision p) { return p == Precision::BF16 ? "bf16" : "fp32"; }

std::string precision_label(Precision p) {
  if (p == Precision::F32) return "fp32";
  return std::string("bf16 (") + bf16_backend_name(bf16_backend()) + ")";
}

PrecisionScope::PrecisionScope(Precision p, Bf16WeightCache* cache) : previous_(t_precision), previous_cache_(t_cache) {
  if (p == Precision::BF16) require_bf16("--precision bf16");
  t_precision = p;
  t_cache = cache;
}
PrecisionScope::~PrecisionScope() {
  t_precision = previous_;
  t_cache = previous_cache_;
}
Precision current_precision() { return t_precision; }
Bf16WeightCache* current_weight_cache() { return t_cache; }

uint16_t to_bf16(float x) { return detail::round_bf16(x); }

float from_bf16(uint16_t b) {
  const uint32_t u = uint32_t{b} << 16;
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

struct Bf16WeightCache::Impl {
  mutable std::mutex mutex;
  std::map<std::tuple<const float*, bool, int64_t, int64_t, int64_t>, std::unique_ptr<PackedBf16>> entries;
};

Bf16WeightCache::Bf16WeightCache() : impl_(std::make_unique<Impl>()) {}
Bf16WeightCache::~Bf16WeightCache() = default;
Bf16WeightCache::Bf16WeightCache(Bf16WeightCache&&) noexcept = default;
Bf16WeightCache& Bf16WeightCache::operator=(Bf16WeightCache&&) noexcept = default;

const PackedBf16& Bf16WeightCache::get(bool trans, int64_t K, int64_t N, const float* w, int64_t ld) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  auto& slot = impl_->entries[{w, trans, K, N, ld}];
  if (!slot) {
    slot = std::make_unique<PackedBf16>();
    pack_bf16(*slot, trans, K, N, w, ld);
  }
  return *slot;
}

void Bf16WeightCache::refresh(const float* data, int64_t n) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  // Entries are ordered by their weight's address first: those inside [data, data + n).
  const auto first = impl_->entries.lower_bound({data, false, INT64_MIN, INT64_MIN, INT64_MIN});
  const std::less<const float*> before;
  for (auto it = first; it != impl_->entries.end() && before(std::get<0>(it->first), data + n); ++it) {
    const auto& [w, trans, K, N, ld] = it->first;
    pack_bf16(*it->second, trans, K, N, w, ld);
  }
}

bool Bf16WeightCache::empty() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->entries.empty();
}

void Bf16WeightCache::clear() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->entries.clear();
}

size_t Bf16WeightCache::bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  size_t n = 0;
  for (const auto& [key, p] : impl_->entries) n += p->data.size() * sizeof(uint16_t);
  return n;
}

}  // namespace atto::kernels
