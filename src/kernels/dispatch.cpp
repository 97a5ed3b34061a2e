// atto/kernels/dispatch.cpp: what this CPU can run (cpuid, the OS's register state, Linux's AMX
// permission), the level the kernels run at ($ATTO_CPU may lower it), and in a portable build the
// table of that level's kernels (isa.h, dispatch.h). Built once, for the baseline.
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>

#include "kernels/kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace atto::kernels {

namespace {

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
    f.missing_bf16 = "OSXSAVE";
    return f;
  }
  const bool fma = c & (1u << 12), sse42 = c & (1u << 20), popcnt = c & (1u << 23);
  const uint64_t xcr0 = xgetbv0();
  const bool os_ymm = (xcr0 & 0x6) == 0x6;    // SSE, AVX
  const bool os_zmm = (xcr0 & 0xe6) == 0xe6;  // SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM
  __get_cpuid_count(7, 0, &a, &b, &c, &d);
  const bool avx2 = b & (1u << 5), bmi1 = b & (1u << 3), bmi2 = b & (1u << 8);
  const bool avx512f = b & (1u << 16), avx512dq = b & (1u << 17), avx512cd = b & (1u << 28);
  const bool avx512bw = b & (1u << 30), avx512vl = b & (1u << 31);
  const bool amx_bf16 = d & (1u << 22), amx_tile = d & (1u << 24);
  __get_cpuid_count(7, 1, &a, &b, &c, &d);
  const bool bf16 = a & (1u << 5);
  f.x86_64_v2 = sse42 && popcnt;
  f.avx2 = f.x86_64_v2 && avx2 && fma && bmi1 && bmi2 && os_ymm;  // x86-64-v3
  f.avx512 = f.avx2 && avx512f && avx512dq && avx512cd && avx512bw && avx512vl && os_zmm;  // x86-64-v4
  f.avx512_bf16 = f.avx512 && bf16;
  if (!f.avx512) f.missing_bf16 = "AVX-512 (F, BW, VL)";
  if (f.avx512 && !bf16) f.missing_bf16 = "AVX512_BF16";
  f.amx = f.avx512_bf16 && amx_bf16 && amx_tile && request_amx_permission();
  return f;
}
#else
CpuFeatures detect() {
  CpuFeatures f;
  f.missing_bf16 = "AVX512_BF16 (an x86-64 feature)";
  return f;
}
#endif

#if defined(ATTO_DISPATCH)
constexpr bool kNative = false;
#else
constexpr bool kNative = true;
#endif

CpuLevel parse_level(const std::string& s) {
  for (CpuLevel l : {CpuLevel::Avx2, CpuLevel::Avx512, CpuLevel::Avx512Bf16, CpuLevel::Amx,
                     CpuLevel::Native})
    if (s == cpu_level_name(l)) return l;
  throw std::runtime_error("ATTO_CPU='" + s + "' is not a level: use avx2, avx512, avx512bf16 or amx");
}

CpuLevel level_from_env() {
  const CpuLevel best = best_cpu_level();
  const char* env = std::getenv("ATTO_CPU");
  if (env == nullptr || *env == '\0') return best;
  const CpuLevel want = parse_level(env);
  if (kNative && want != CpuLevel::Native)
    throw std::runtime_error(std::string("ATTO_CPU=") + env +
                             ": this atto was built for one machine's CPU (-march=native), so its kernels have one "
                             "level; build it with -DATTO_PORTABLE=ON to choose levels at run time, or unset ATTO_CPU");
  if (!kNative && want == CpuLevel::Native)
    throw std::runtime_error("ATTO_CPU=native: this is a portable build; use avx2, avx512, avx512bf16 or amx");
  if (static_cast<int>(want) > static_cast<int>(best))
    throw std::runtime_error(std::string("ATTO_CPU=") + env + ": this CPU cannot run it (its highest level is " +
                             cpu_level_name(best) + "); unset ATTO_CPU or choose a lower level");
  return want;
}

std::once_flag g_level_once;
CpuLevel g_level = CpuLevel::Native;
bool g_level_from_env = false;

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

const char* cpu_level_name(CpuLevel l) {
  switch (l) {
    case CpuLevel::Avx2: return "avx2";
    case CpuLevel::Avx512: return "avx512";
    case CpuLevel::Avx512Bf16: return "avx512bf16";
    case CpuLevel::Amx: return "amx";
    case CpuLevel::Native: return "native";
  }
  return "native";
}

CpuLevel best_cpu_level() {
  if (kNative) return CpuLevel::Native;
  const CpuFeatures& f = cpu_features();
  if (f.amx) return CpuLevel::Amx;
  if (f.avx512_bf16) return CpuLevel::Avx512Bf16;
  if (f.avx512) return CpuLevel::Avx512;
  if (f.avx2) return CpuLevel::Avx2;
  throw std::runtime_error(
      "this CPU lacks AVX2 and FMA (x86-64-v3), which this portable build of atto needs; build atto from source on "
      "this machine (scripts/build, -march=native)");
}

CpuLevel cpu_level() {
  // A bad $ATTO_CPU throws on every call (call_once runs again after an exception).
  std::call_once(g_level_once, [] {
    g_level = level_from_env();
    const char* env = std::getenv("ATTO_CPU");
    g_level_from_env = env != nullptr && *env != '\0';
  });
  return g_level;
}

bool cpu_level_allows(CpuLevel l) {
  const CpuLevel c = cpu_level();
  return c == CpuLevel::Native || static_cast<int>(c) >= static_cast<int>(l);
}

std::string kernels_description() {
  const CpuLevel l = cpu_level();
  std::string s = std::string("kernels: ") + cpu_level_name(l);
  if (kNative) {
#if defined(__x86_64__)
    s += " (built for this machine's CPU, -march=native)";
#elif defined(__aarch64__)
    s += " (aarch64 build, NEON)";
#endif
  } else {
    const char* build = l == CpuLevel::Avx2 ? "x86-64-v3" : "x86-64-v4";
    s += std::string(" (") + build + " build, " + (g_level_from_env ? "set by ATTO_CPU" : "chosen from cpuid") + ")";
  }
  try {
    s += std::string("; bf16: ") + bf16_backend_name(bf16_backend());
  } catch (const std::exception&) {
    s += "; bf16: not usable ($ATTO_BF16_KERNEL)";
  }
  try {
    s += std::string("; int8: ") + quant_kernel_name();  // the quantized weights' dot products
  } catch (const std::exception&) {
    s += "; int8: not usable ($ATTO_QUANT_DOT)";
  }
  return s;
}

#if defined(ATTO_DISPATCH)
std::atomic<const KernelTable*> g_kernel_table{nullptr};

const KernelTable& choose_kernel_table() {
  const KernelTable* t = nullptr;
  switch (cpu_level()) {
    case CpuLevel::Avx2: t = &atto_kernel_table_isa_avx2; break;
    default: t = &atto_kernel_table_isa_avx512; break;
  }
  g_kernel_table.store(t, std::memory_order_release);
  return *t;
}
#endif

}  // namespace atto::kernels
