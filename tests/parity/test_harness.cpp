// Tests of the parity harness itself, and proof that atto's safetensors files load in an
// independent Python reader (st.py) and vice versa.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "base/error.h"
#include "io/safetensors.h"
#include "parity/harness.h"
#include "support.h"

using namespace atto;

namespace {

using atto::test::error_of;
using atto::test::TempDir;

// Sets an environment variable for the scope, restoring the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_.c_str(), old_.c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace

// Without torch the parity executable must fail, not pass silently (skip only when
// ATTO_ALLOW_NO_TORCH=1).
TEST(Harness, TorchIsAvailable) {
  ATTO_REQUIRE_TORCH();
  EXPECT_TRUE(atto::test::torch_available());
}

TEST(Harness, TorchCheckFollowsAttoPython) {
  ScopedEnv env("ATTO_PYTHON", "/nonexistent/python3");
  EXPECT_FALSE(atto::test::torch_available());
  EXPECT_NE(atto::test::no_torch_message().find("/nonexistent/python3"), std::string::npos);
  const std::string msg = error_of([] { atto::test::run_reference("test_safetensors_python.py", "selftest"); });
  EXPECT_NE(msg.find("cannot run '/nonexistent/python3'"), std::string::npos) << msg;
}

// atto writes, st.py reads (and checks the layout), st.py writes back, atto reads.
TEST(Harness, AttoFileLoadsInIndependentPythonReader) {
  Rng rng(11);
  const Tensor w = Tensor::randn({3, 4}, rng);
  const Tensor wt = w.as_strided({4, 3}, {1, 4}, 0);  // non-contiguous
  const std::vector<std::pair<std::string, Tensor>> ts = {
      {"w", w}, {"w.t", wt}, {"scalar", Tensor::scalar(-0.5f)}, {"empty", Tensor::zeros({0, 2})}};
  TempDir dir("harness");
  const std::string in = dir / "from_atto.safetensors";
  io::save_safetensors(in, ts, {{"writer", "atto"}, {"note", "caf\xc3\xa9"}});
  const auto ref = atto::test::run_reference("test_safetensors_python.py", "roundtrip", {"--in", in});

  EXPECT_EQ(ref.metadata.at("echo.writer"), "atto");
  EXPECT_EQ(ref.metadata.at("echo.note"), "caf\xc3\xa9");
  EXPECT_EQ(ref.metadata.at("names"), "w,w.t,scalar,empty");  // file order seen by Python
  for (const auto& [name, t] : ts) {
    const Tensor& got = ref.get(name + ".x2");
    ASSERT_EQ(got.shape(), t.shape()) << name;
    const auto g = got.to_vector(), want = t.to_vector();
    for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], 2 * want[i]) << name << " element " << i;
  }
  EXPECT_EQ(ref.get("py.arange").to_vector(), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(ref.get("py.arange").shape(), (Shape{2, 3}));
  EXPECT_EQ(ref.get("py.f64").to_vector(), (std::vector<float>{0.1f, -1e-3f}));
  EXPECT_EQ(ref.get("py.f16").to_vector(), (std::vector<float>{1.5f, -0.25f}));
  EXPECT_EQ(ref.get("py.shapes").to_vector(), (std::vector<float>{2, 2, 0, 2}));
}

// st.py's own checks (all dtypes, broken files rejected), and its float output loads in atto.
TEST(Harness, PythonWriterSelfTest) {
  const auto ref = atto::test::run_reference("test_safetensors_python.py", "selftest");
  EXPECT_EQ(ref.metadata.at("case"), "selftest");
  EXPECT_EQ(ref.names, (std::vector<std::string>{"f32", "f64", "f16", "scalar", "empty", "strided"}));
  EXPECT_EQ(ref.get("scalar").shape(), Shape{});
  EXPECT_EQ(ref.get("scalar").item(), 2.5f);
  EXPECT_EQ(ref.get("empty").shape(), (Shape{0, 3}));
  // strided = arange(12).reshape(3, 4).T: element [i, j] = 4 j + i.
  const Tensor& s = ref.get("strided");
  ASSERT_EQ(s.shape(), (Shape{4, 3}));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(s.at({i, j}), static_cast<float>(4 * j + i));
}

// torch tensors through st.py: bf16 and f16 decode in atto exactly like torch's own casts.
TEST(Harness, TorchTensorsIncludingBfloat16) {
  ATTO_REQUIRE_TORCH();
  const auto ref = atto::test::run_reference("test_safetensors_python.py", "torch");
  const Tensor& x = ref.get("x");
  EXPECT_EQ(x.shape(), (Shape{4, 5}));
  atto::test::expect_close(ref.get("x.bf16"), ref.get("x.bf16_as_f32"), 0.0f, "bf16 decode");
  atto::test::expect_close(ref.get("x.f16"), ref.get("x.f16_as_f32"), 0.0f, "f16 decode");
  atto::test::expect_close(ref.get("x.f64"), x, 0.0f, "f64 decode");
  atto::test::expect_close(ref.get("x.bf16"), x, 0.02f, "bf16 vs f32");
  const Tensor& xt = ref.get("x.t");
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j) EXPECT_EQ(xt.at({j, i}), x.at({i, j}));
  EXPECT_FALSE(ref.metadata.at("torch").empty());
}

TEST(Harness, ScriptFailureReportsItsOutput) {
  const std::string msg = error_of([] { atto::test::run_reference("test_safetensors_python.py", "fail"); });
  EXPECT_NE(msg.find("exit status 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("deliberate failure for the harness test"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--case fail"), std::string::npos) << msg;

  const std::string unknown = error_of([] { atto::test::run_reference("test_safetensors_python.py", "no_such_case"); });
  EXPECT_NE(unknown.find("unknown case 'no_such_case'"), std::string::npos) << unknown;
}

TEST(Harness, ScriptWithoutOutputOrMissingScript) {
  const std::string none = error_of([] { atto::test::run_reference("test_safetensors_python.py", "no_output"); });
  EXPECT_NE(none.find("wrote no file"), std::string::npos) << none;
  const std::string missing = error_of([] { atto::test::run_reference("no_such_script.py", "x"); });
  EXPECT_NE(missing.find("no_such_script.py' not found"), std::string::npos) << missing;
}

TEST(Harness, ExpectClosePassesWithinTolerance) {
  const Tensor a = Tensor::from_vector({2, 2}, {1, 2, 3, -INFINITY});
  const Tensor b = Tensor::from_vector({2, 2}, {1.0005f, 2, 3, -INFINITY});
  atto::test::expect_close(a, b, 1e-3f, "close");  // a failure here fails this test
}

TEST(Harness, ExpectCloseReportsWhereAndHowMuch) {
  const Tensor a = Tensor::from_vector({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor b = a.clone();
  b.at({1, 2}) = 5.5f;
  b.at({0, 1}) = 1.01f;
  EXPECT_NONFATAL_FAILURE(atto::test::expect_close(a, b, 1e-3f, "logits"),
                          "logits: max |got - want| = 0.5 at index [1, 2] (got 5, want 5.5)");
  EXPECT_NONFATAL_FAILURE(atto::test::expect_close(a, b, 1e-3f, "logits"),
                          "2 of 6 elements differ by more than the tolerance");
  EXPECT_NONFATAL_FAILURE(atto::test::expect_close(a, b, 1e-3f, "logits"), "[0, 1] got 1 want 1.01");
  EXPECT_NONFATAL_FAILURE(atto::test::expect_close(a, Tensor::zeros({3, 2}), 1.0f, "y"),
                          "y: shape [2, 3] differs from expected [3, 2]");
  Tensor n = a.clone();
  n.at({0, 0}) = NAN;
  EXPECT_NONFATAL_FAILURE(atto::test::expect_close(n, a, 1e9f, "nan"), "at index [0, 0] (got nan");
  EXPECT_NONFATAL_FAILURE(atto::test::expect_close(n, n, 1e9f, "nan"), "1 of 6 elements");
  EXPECT_NONFATAL_FAILURE(atto::test::expect_close(Tensor(), a, 1.0f, "u"), "undefined");
}
