// gen::StopStrings: the streamed text equals the text up to the first stop string, and never
// shows any part of a stop string.
#include "generate/stop_strings.h"

#include <gtest/gtest.h>

#include <random>

#include "base/error.h"

namespace atto::gen {
namespace {

struct Streamed {
  std::string text;
  bool stopped = false;
  std::vector<std::string> emitted;
};

Streamed stream(const std::vector<std::string>& stops, const std::vector<std::string>& pieces) {
  StopStrings s(stops);
  Streamed r;
  for (const std::string& p : pieces) {
    bool done = false;
    r.emitted.push_back(s.push(p, done));
    r.text += r.emitted.back();
    if (done) {
      r.stopped = true;
      return r;
    }
  }
  r.emitted.push_back(s.finish());
  r.text += r.emitted.back();
  return r;
}

TEST(StopStrings, EndsBeforeTheFirstStopStringAcrossPieces) {
  const Streamed r = stream({"\n\n", "END"}, {"Once", " upon\n", "\nmore"});
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "Once upon");
  const Streamed e = stream({"END"}, {"the E", "N", "D!"});
  EXPECT_EQ(e.text, "the ");
  // Held back while it could be a stop string, then released.
  const Streamed h = stream({"END"}, {"E", "N", "d"});
  EXPECT_FALSE(h.stopped);
  EXPECT_EQ(h.emitted[0], "");
  EXPECT_EQ(h.emitted[1], "");
  EXPECT_EQ(h.emitted[2], "ENd");
  EXPECT_EQ(h.text, "ENd");
}

TEST(StopStrings, NoStopsPassEverythingThrough) {
  const Streamed r = stream({}, {"a", "b", ""});
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.emitted[0], "a");
  EXPECT_EQ(r.text, "ab");
}

TEST(StopStrings, EmptyStopStringIsAnError) { EXPECT_THROW(StopStrings({"x", ""}), Error); }

// Random texts over a small alphabet cut into random pieces, against the definition.
TEST(StopStrings, MatchesTheDefinitionOnRandomTexts) {
  std::mt19937 rng(7);
  auto word = [&](int max_len) {
    std::string w;
    const int n = 1 + static_cast<int>(rng() % max_len);
    for (int i = 0; i < n; ++i) w += "ab\n"[rng() % 3];
    return w;
  };
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<std::string> stops;
    for (int i = 0, n = static_cast<int>(rng() % 3); i < n; ++i) stops.push_back(word(4));
    const std::string text = word(30);
    std::vector<std::string> pieces;
    for (size_t i = 0; i < text.size();) {
      const size_t len = 1 + rng() % 4;
      pieces.push_back(text.substr(i, len));
      i += len;
    }
    size_t cut = std::string::npos;
    for (const std::string& s : stops) cut = std::min(cut, text.find(s));
    const Streamed r = stream(stops, pieces);
    EXPECT_EQ(r.text, text.substr(0, cut)) << trial;
    EXPECT_EQ(r.stopped, cut != std::string::npos) << trial;
    // No emitted prefix ever ends inside a stop string's start that later completes it: every
    // emitted prefix is a prefix of the final text.
    std::string so_far;
    for (const std::string& e : r.emitted) {
      so_far += e;
      EXPECT_EQ(r.text.compare(0, so_far.size(), so_far), 0) << trial;
    }
  }
}

}  // namespace
}  // namespace atto::gen
