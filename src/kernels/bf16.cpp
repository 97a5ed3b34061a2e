// atto/kernels/bf16.cpp: bf16 mixed precision's machinery: which kernels run the products (what
// the CPU has, dispatch.cpp, within the level cpu_level() allows), the precision scope and the
// weight cache. Built once (not per level). The kernels are in gemm_bf16.cpp, the rounding and
// packing in bf16_pack.cpp.
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

#include "kernels/kernels.h"

namespace atto::kernels {

namespace {

Bf16Backend best_backend() {
  if (bf16_supported(Bf16Backend::Amx)) return Bf16Backend::Amx;
  if (bf16_supported(Bf16Backend::Avx512Bf16)) return Bf16Backend::Avx512Bf16;
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
    case Bf16Backend::Amx: return cpu_features().amx && cpu_level_allows(CpuLevel::Amx);
    case Bf16Backend::Avx512Bf16: return cpu_features().avx512_bf16 && cpu_level_allows(CpuLevel::Avx512Bf16);
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
  if (cpu_features().avx512_bf16)  // the CPU has it; $ATTO_CPU took it away
    throw std::runtime_error(std::string(what) + ": ATTO_CPU=" + cpu_level_name(cpu_level()) +
                             " runs no bf16 kernels (avx512bf16 or amx do); use --precision fp32 or unset ATTO_CPU");
  throw std::runtime_error(std::string(what) + ": this CPU has no bf16 arithmetic (missing " + cpu_features().missing_bf16 +
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
