// Token files (data/token_file.h), corpus preparation (data/prepare.h) and training windows over
// prepared corpora (data/token_dataset.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <omp.h>

#include <fstream>

#include "data/prepare.h"
#include "data/token_dataset.h"
#include "support.h"
#include "tokenize/bpe.h"

using namespace atto;
using ::testing::HasSubstr;

namespace {

std::vector<int32_t> read_all(const TokenFileReader& r) {
  std::vector<int32_t> out(static_cast<size_t>(r.size()));
  r.read(0, r.size(), out.data());
  return out;
}

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& b) { std::ofstream(path, std::ios::binary) << b; }

}  // namespace

TEST(TokenFile, RoundTripsBothWidthsAndChecksIds) {
  test::TempDir dir;
  for (int64_t vocab : {300, 65536, 70000}) {
    const std::string p = dir / "t.bin";
    TokenFileWriter w(p, vocab);
    const std::vector<int32_t> ids = {0, 1, static_cast<int32_t>(vocab - 1), 255, 256};
    w.append(ids);
    w.append(std::vector<int32_t>{7});
    w.append(std::vector<int32_t>{});  // a chunk with no tokens (a split with no validation documents yet)
    EXPECT_THROW(w.append(std::vector<int32_t>{static_cast<int32_t>(vocab)}), Error);
    w.close();
    const TokenFileReader r(p);
    EXPECT_EQ(r.bytes_per_token(), vocab <= 65536 ? 2 : 4);
    EXPECT_EQ(r.vocab_size(), vocab);
    EXPECT_EQ(read_all(r), (std::vector<int32_t>{0, 1, static_cast<int32_t>(vocab - 1), 255, 256, 7}));
    EXPECT_EQ(std::filesystem::file_size(p), 64 + 6 * r.bytes_per_token());
  }
}

TEST(TokenFile, DamagedFilesAreNamedErrors) {
  test::TempDir dir;
  const std::string good = dir / "good.bin", bad = dir / "bad.bin";
  TokenFileWriter w(good, 1000);
  w.append(std::vector<int32_t>{1, 2, 3, 4});
  w.close();
  const std::string b = bytes_of(good);
  auto refused = [&](std::string damaged, const std::string& says) {
    write_bytes(bad, damaged);
    try {
      TokenFileReader r(bad);
      std::vector<int32_t> all(static_cast<size_t>(r.size()));
      r.read(0, r.size(), all.data());
      ADD_FAILURE() << "accepted: " << says;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("bad.bin"));
      EXPECT_THAT(e.what(), HasSubstr(says));
    }
  };
  refused(b.substr(0, b.size() - 1), "truncated");
  refused(b + "xx", "the header says 4 tokens");
  refused(b.substr(0, 30), "shorter than its 64-byte header");
  refused("NOTATOKN" + b.substr(8), "no ATTOTOK magic");
  std::string v = b;
  v[8] = 9;
  refused(v, "version 9");
  std::string wd = b;
  wd[12] = 3;
  refused(wd, "3 bytes per token");
  std::string big = b;
  big[18] = 0x10;  // vocabulary 1000 + 0x100000: too big for 2-byte tokens
  refused(big, "does not fit 2-byte tokens");
  std::string id = b;
  id[64] = static_cast<char>(0xFF);
  id[65] = static_cast<char>(0xFF);  // token 0 = 65535 >= 1000
  refused(id, "outside the vocabulary");
}

TEST(Prepare, SplitAndTokensDependOnTheDocumentsNotOnChunksOrThreads) {
  test::TempDir dir;
  std::string text;
  for (int i = 0; i < 400; ++i)
    text += "Paragraph " + std::to_string(i) + " of the corpus, \xC3\xA9t\xC3\xA9.\nA second line " +
            std::to_string(i * 7 % 13) + (i % 3 ? "\n\n" : "\n\n\n");
  write_bytes(dir / "in.txt", text);
  const std::string_view texts[] = {text};
  const BpeTokenizer tok = BpeTokenizer::train(texts, {.vocab_size = 320});
  std::vector<int32_t> ref_train, ref_val;
  for (auto [chunk, threads] :
       {std::pair{int64_t{1024}, 1}, std::pair{int64_t{4096}, 2}, std::pair{int64_t{1} << 20, 2}}) {
    omp_set_num_threads(threads);
    const std::string out = dir / ("p" + std::to_string(chunk));
    const PrepareStats s =
        prepare_corpus(tok, {.inputs = {dir / "in.txt"}, .out = out, .val_fraction = 0.1, .chunk_bytes = chunk});
    EXPECT_EQ(s.documents, 400);
    EXPECT_GT(s.val_documents, 15);
    EXPECT_LT(s.val_documents, 70);
    const std::vector<int32_t> tr = read_all(TokenFileReader(out + "/train.bin")),
                               va = read_all(TokenFileReader(out + "/val.bin"));
    if (ref_train.empty()) {
      ref_train = tr;
      ref_val = va;
      // Every document is its own encoding followed by <|endoftext|>.
      std::vector<int32_t> all = tr;
      all.insert(all.end(), va.begin(), va.end());
      EXPECT_EQ(std::count(all.begin(), all.end(), tok.end_of_text()), 400);
      const std::vector<int32_t> first = tok.encode(text.substr(0, text.find("\n\n") + 2));
      EXPECT_TRUE(std::equal(first.begin(), first.end(), tr.begin()) ||
                  std::equal(first.begin(), first.end(), va.begin()));
    }
    EXPECT_EQ(tr, ref_train) << "chunk " << chunk << " threads " << threads;
    EXPECT_EQ(va, ref_val) << "chunk " << chunk << " threads " << threads;
  }
  omp_set_num_threads(2);
  // Training windows over the prepared corpus: x and y are the files' tokens, shifted by one.
  const std::string out = dir / "p1024";
  TokenFileDataset data(out, tok);
  EXPECT_EQ(data.size(Split::Train), static_cast<int64_t>(ref_train.size()));
  Rng rng(4);
  const Batch b = data.sample_batch(rng, 3, 16);
  for (int64_t r = 0; r < 3; ++r) {
    const auto at = std::search(ref_train.begin(), ref_train.end(), b.x.begin() + r * 16, b.x.begin() + r * 16 + 16);
    ASSERT_NE(at, ref_train.end());
    EXPECT_EQ(*(at + 16), b.y[r * 16 + 15]);
  }
  int64_t targets = 0;
  for (int64_t i = 0; i < data.num_eval_batches(Split::Val, 4, 16); ++i)
    targets += data.eval_batch(Split::Val, i, 4, 16).num_targets();
  EXPECT_EQ(targets, static_cast<int64_t>(ref_val.size()) - 1);  // every val target once
  // A tokenizer of another size does not fit the files.
  const BpeTokenizer other = BpeTokenizer::train(texts, {.vocab_size = 300});
  EXPECT_THAT(test::error_of([&] { TokenFileDataset d(out, other); }), HasSubstr("vocabulary of 320"));
}
