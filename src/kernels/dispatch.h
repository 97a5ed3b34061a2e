// atto/kernels/dispatch.h: the table of level-dependent kernels a portable build chooses from
// at start-up (isa.h). Included at the end of kernels.h; empty in a native build.
//
// Each level's compile of the kernel files fills one KernelTable (kernel_table.cpp) with its own
// functions. Outside the kernel files, each name of the list below is an object that calls the
// chosen table's function: kernels::gemm(...) reads as before, and converts to a plain function
// pointer where one is wanted.
#pragma once

#if defined(ATTO_DISPATCH)

#include <atomic>

#define ATTO_KERNEL_LIST(X)                                                                                        \
  X(fma_peak_gflops) X(gemm) X(gemm_naive) X(gemm_batched) X(pack_bf16) X(gemm_bf16_packed) X(gemm_bf16)          \
  X(gemm_bf16_naive) X(to_bf16) X(from_bf16) X(bf16_peak_gflops) X(linear_forward) X(linear_backward)             \
  X(linear_backward_ex) X(linear_gelu_backward) X(linear_gelu_forward) X(linear_residual_forward)                 \
  X(linear_forward_naive) X(linear_backward_naive) X(add_forward) X(bias_add_forward) X(bias_add_backward)        \
  X(relu_forward) X(relu_backward) X(gelu_tanh_forward) X(gelu_tanh_backward) X(gelu_erf_forward)                 \
  X(gelu_erf_backward) X(gelu_erf_backward_ex) X(gelu_erf_forward_slope) X(gelu_erf_slope_rows)                   \
  X(gelu_erf_bias_slope) X(gelu_erf_backward_slope) X(silu_forward) X(silu_backward) X(swiglu_forward)            \
  X(swiglu_backward) X(dropout_forward) X(dropout_backward) X(rope_forward) X(rope_backward)                      \
  X(embedding_forward) X(embedding_backward) X(layernorm_forward) X(layernorm_backward) X(rmsnorm_forward)        \
  X(rmsnorm_backward) X(layernorm_forward_naive) X(layernorm_backward_naive) X(rmsnorm_forward_naive)             \
  X(rmsnorm_backward_naive) X(softmax_forward) X(softmax_backward) X(attention_forward) X(attention_backward)      \
  X(attention_forward_naive) X(attention_backward_naive) X(attention_probs) X(cross_entropy_forward)              \
  X(cross_entropy_backward) X(cross_entropy_forward_naive) X(cross_entropy_backward_naive) X(adam_update)         \
  X(sgd_update) X(adam_update_many) X(sum_squares) X(scale_inplace) X(sum_squares_many)            \
  X(scale_inplace_many) X(exp_shift_sum) X(sum_of) X(max_of)                                                      \
  X(linear_quant_forward) X(linear_quant_forward_naive) X(dequantize_rows) X(quant_kernel_name)                  \
  X(quant_layout_for) X(quant_pack)

#if defined(ATTO_KERNEL_VARIANT)
#define ATTO_KERNEL_DECL_NS ATTO_KERNEL_VARIANT
#else
#define ATTO_KERNEL_DECL_NS isa
#endif

namespace atto::kernels {

struct KernelTable {
#define ATTO_KERNEL_SLOT(name) decltype(&ATTO_KERNEL_DECL_NS::name) name;
  ATTO_KERNEL_LIST(ATTO_KERNEL_SLOT)
#undef ATTO_KERNEL_SLOT
};

// The table cpu_level() chose (set by choose_kernel_table() on first use).
extern std::atomic<const KernelTable*> g_kernel_table;
const KernelTable& choose_kernel_table();
inline const KernelTable& kernel_table() {
  const KernelTable* t = g_kernel_table.load(std::memory_order_acquire);
  return t != nullptr ? *t : choose_kernel_table();
}

#if !defined(ATTO_KERNEL_VARIANT)
template <auto Slot, class F>
struct Dispatched;
template <auto Slot, class R, class... A>
struct Dispatched<Slot, R (*)(A...)> {
  static R call(A... a) { return (kernel_table().*Slot)(a...); }
  R operator()(A... a) const { return (kernel_table().*Slot)(a...); }
  operator decltype(&call)() const { return &call; }
};
#define ATTO_KERNEL_OBJECT(name) \
  inline constexpr Dispatched<&KernelTable::name, decltype(KernelTable::name)> name{};
ATTO_KERNEL_LIST(ATTO_KERNEL_OBJECT)
#undef ATTO_KERNEL_OBJECT
#endif

}  // namespace atto::kernels

// Each level's table (kernel_table.cpp, one per level's build of the kernel files).
extern "C" const atto::kernels::KernelTable atto_kernel_table_isa_avx2;
extern "C" const atto::kernels::KernelTable atto_kernel_table_isa_avx512;

#endif  // ATTO_DISPATCH
