// Parity of `atto import` with Hugging Face's GPT-2 (reference: tests/parity/ref_hf_gpt2.py,
// torch 1.13, no transformers package). The reference writes a reduced GPT-2 (2 layers, d 32,
// 4 heads, 16 positions, a 264-token byte-level vocabulary) as Hugging Face ships it (Conv1D
// weights [in, out], attn.bias buffers, tied head) with random weights, and computes its logits
// for a text in float64 by GPT-2's equations (gelu_new, LayerNorm eps 1e-5, causal attention
// scaled by 1/sqrt(head_dim)). atto imports the directory; then
//   - atto's tokenizer encodes the text to the reference's ids (the merges applied in Python);
//   - atto's logits match the reference's: max |diff| <= 1e-4 (float32 rounding only);
//   - the run directory import_run writes loads (load_run) to the same logits, bit for bit.
// Cases: names with the "transformer." prefix in F32, without it in F16 and in BF16 (the
// reference computes with the rounded values the file holds).
#include <gtest/gtest.h>

#include "autograd/tape.h"
#include "parity/harness.h"
#include "run/hf_model.h"
#include "support.h"

namespace atto {
namespace {
namespace hf_import_parity {

constexpr float kTol = 1e-4f;

Tensor logits_of(GPT& m, const std::vector<int32_t>& ids) {
  NoGradGuard ng;
  return m.forward(ids, 1, static_cast<int64_t>(ids.size())).contiguous();
}

void check_case(const std::string& name, const std::string& dtype) {
  test::TempDir dir;
  const std::string hf = dir / "hf";
  const io::SafetensorsFile ref = test::run_reference("ref_hf_gpt2.py", name, {"--dir", hf, "--dtype", dtype});
  LoadedModel lm = load_hf_gpt2(hf);
  const Tensor want_ids = ref.get("ids");
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < want_ids.numel(); ++i) ids.push_back(static_cast<int32_t>(want_ids.data()[i]));
  EXPECT_EQ(lm.tokenizer->encode(ref.metadata.at("text")), ids) << "atto's tokenizer and the reference's merges";
  const Tensor got = logits_of(*lm.model, ids);
  test::expect_close(got, ref.get("logits"), kTol, name + " " + dtype + " logits");
  std::printf("[ hf import ] %s %s: max |logits - reference| = %.3g\n", name.c_str(), dtype.c_str(),
              static_cast<double>(max_abs_diff(got, ref.get("logits"))));

  import_run(hf, dir / "run", false);
  LoadedModel back = load_run(dir / "run");
  const Tensor again = logits_of(*back.model, ids);
  EXPECT_EQ(max_abs_diff(again, got), 0.0f) << "the imported run directory gives other logits";
}

TEST(HfImportParity, PrefixedF32) {
  ATTO_REQUIRE_TORCH();
  check_case("prefix", "f32");
}

TEST(HfImportParity, PlainF16AndBf16) {
  ATTO_REQUIRE_TORCH();
  check_case("plain", "f16");
  check_case("plain", "bf16");
}

}  // namespace hf_import_parity
}  // namespace
}  // namespace atto
