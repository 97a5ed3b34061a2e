// tests/parity/harness.h: run a PyTorch reference script, compare atto's tensors with its output.
//
//   TEST(LinearParity, ForwardAndBackward) {
//     ATTO_REQUIRE_TORCH();                          // fails (or skips, see below) without torch
//     auto ref = atto::test::run_reference("linear_ref.py", "small", {"--bias", "1"});
//     Tensor y = ... run atto on ref.get("w"), ref.get("x") ...;
//     atto::test::expect_close(y, ref.get("y"), 1e-5f, "linear y");
//   }
//
// The reference script contract
// - Run as: $ATTO_PYTHON <source>/tests/parity/<script> --case <case> --out <file> [extra args]
//   ($ATTO_PYTHON defaults to /usr/bin/python3, Debian's python with torch and numpy).
// - The script makes ALL weights and inputs itself (torch, seeded), computes outputs and
//   gradients, and writes everything into the one safetensors file <file> with st.py
//   (`st.save({...}, args.out, metadata={...})`). It exits 0 on success; any other exit status
//   (an uncaught exception, sys.exit("why")) fails the C++ test with the script's output.
// - Float32 tensors compare directly; write float64 if the reference is computed in double
//   (atto reads F32, F64, F16, BF16, all as float32).
//
// The source folder is $ATTO_SOURCE_DIR (set by ctest), else the folder this file was compiled
// from, else the current directory.
//
// Torch: a parity run without torch must not look green. ATTO_REQUIRE_TORCH() FAILS the test
// when $ATTO_PYTHON cannot import torch, and skips it only when ATTO_ALLOW_NO_TORCH=1.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "tensor/tensor.h"

namespace atto::test {

// $ATTO_PYTHON, or /usr/bin/python3.
std::string python_executable();

// The repository root holding tests/parity/ (see above).
std::string source_dir();

// Whether $ATTO_PYTHON has a `torch` module (checked once per interpreter path, cheaply:
// the module is found, not imported).
bool torch_available();

// Whether ATTO_ALLOW_NO_TORCH=1 is set: parity tests then skip instead of failing without torch.
bool allow_no_torch();

// The message tests print when torch is missing.
std::string no_torch_message();

// Runs tests/parity/<script> --case <case_name> --out <tmp> <extra_args...>, loads and returns
// the file it wrote, and removes the temporary files. Throws atto::Error with the command line
// and the script's output (stdout and stderr, last 6000 bytes) if the script cannot start, exits
// non-zero, is killed, or writes no valid file.
io::SafetensorsFile run_reference(const std::string& script, const std::string& case_name,
                                  const std::vector<std::string>& extra_args = {});

// GoogleTest check: same shape and max |got - want| <= tol. On failure reports (one non-fatal
// failure) the max difference, its index and both values there, how many elements exceed tol,
// and the first few of them. NaN never matches anything; equal infinities match.
void expect_close(const Tensor& got, const Tensor& want, float tol, const std::string& what);

// expect_close, then the largest |got - want| for a summary line (infinity if the shapes differ).
float compare(const Tensor& got, const Tensor& want, float tol, const std::string& what);

// A number as a reference script's argument (9 significant digits: a float's value exactly).
std::string num(double v);

// The comma-separated names a reference script wrote under the metadata key `key` of its file.
std::set<std::string> split_names(const io::SafetensorsFile& ref, const std::string& key);

}  // namespace atto::test

// First line of a test that needs torch (see "Torch" above). Needs <gtest/gtest.h>.
#define ATTO_REQUIRE_TORCH()                              \
  do {                                                    \
    if (!::atto::test::torch_available()) {               \
      if (::atto::test::allow_no_torch()) {               \
        GTEST_SKIP() << ::atto::test::no_torch_message(); \
      } else {                                            \
        FAIL() << ::atto::test::no_torch_message();       \
      }                                                   \
    }                                                     \
  } while (0)
