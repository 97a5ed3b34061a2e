// atto/kernels/isa.h: which instruction-set level the kernels run at, and the namespaces that
// let one portable binary hold the kernels compiled for several levels (docs/cpu.md).
//
// A portable x86-64 build (cmake -DATTO_PORTABLE=ON) compiles every file of src/kernels that
// computes (all but threads.cpp, bf16.cpp, dispatch.cpp) once per level, each time into its own
// inline namespace (ATTO_KERNEL_VARIANT: isa_avx2, isa_avx512) with that level's
// -march, and links each level's objects into one object whose only global symbol is its table
// of kernel functions (kernel_table.cpp; the level's inline functions and template instances stay
// private to it, so no AVX-512 copy of std::vector's code can reach an AVX2 machine). Everything
// else is built for x86-64-v2 (so that a CPU without AVX2 gets an error, not a crash) and calls the kernels through the table chosen once at start-up
// (dispatch.h). A native build (ATTO_NATIVE=ON, the default, and every non-x86 build) compiles
// the kernels once, for the build machine, and calls them directly.
#pragma once

#include <string>

// ATTO_ISA_BEGIN / ATTO_ISA_END enclose kernels.h's level-dependent declarations; ATTO_KERNELS_NS
// is the namespace the kernel files define them (and their private helpers) in.
#if defined(ATTO_KERNEL_VARIANT)  // one level's compile of the kernel files
#define ATTO_ISA_BEGIN inline namespace ATTO_KERNEL_VARIANT {
#define ATTO_ISA_END }
#define ATTO_KERNELS_NS atto::kernels::inline ATTO_KERNEL_VARIANT
#elif defined(ATTO_DISPATCH)  // the rest of a portable build: declarations only (for their types)
#define ATTO_ISA_BEGIN namespace isa {
#define ATTO_ISA_END }
#define ATTO_KERNELS_NS atto::kernels
#else  // a native build
#define ATTO_ISA_BEGIN
#define ATTO_ISA_END
#define ATTO_KERNELS_NS atto::kernels
#endif

namespace atto::kernels {

// The levels, lowest first. The fp32 kernels come in two builds (avx2 = x86-64-v3: AVX2 + FMA,
// avx512 = x86-64-v4); avx512bf16 and amx are the avx512 build
// with bf16 products on vdpbf16ps or on AMX tiles (bf16_backend()). Native: a build for one
// machine (-march=native), or any non-x86 build.
enum class CpuLevel { Avx2, Avx512, Avx512Bf16, Amx, Native };
const char* cpu_level_name(CpuLevel l);  // "avx2", "avx512", "avx512bf16", "amx", "native"
// The level the kernels run at: the highest this CPU (and OS) supports, or $ATTO_CPU when set to
// a lower one (avx2|avx512|avx512bf16|amx; for tests and comparisons). Decided on the first call;
// throws std::runtime_error naming $ATTO_CPU when it is unknown, above what this CPU can run, or
// set in a native build (which has one level only), and in a portable build on a CPU without
// AVX2 and FMA.
CpuLevel cpu_level();
// The highest level this CPU supports (what cpu_level() is without $ATTO_CPU).
CpuLevel best_cpu_level();
// Whether the kernels may use what level l adds (a native build: whatever the CPU has).
bool cpu_level_allows(CpuLevel l);

// What this CPU and its OS can run (cpuid and xgetbv; AMX only once Linux granted the process
// the tile state). All false off x86-64.
struct CpuFeatures {
  bool x86_64_v2 = false;    // SSE4.2, POPCNT
  bool avx2 = false;         // x86-64-v3: AVX2, FMA, BMI1/2, and the OS saves the 256-bit state
  bool avx512 = false;       // x86-64-v4: AVX512F, DQ, CD, BW, VL, and the OS saves the 512-bit state
  bool avx512_bf16 = false;  // vdpbf16ps
  bool amx = false;          // AMX-TILE + AMX-BF16, granted
  std::string missing_bf16;  // what bf16 lacks here, for error messages
};
const CpuFeatures& cpu_features();

// One line for --version and benchmark headers, e.g.
// "kernels: avx512 (x86-64-v4 build, chosen from cpuid); bf16: avx512bf16".
std::string kernels_description();

}  // namespace atto::kernels
