// atto/generate/stop_strings.h: streamed text that ends at the first of some stop strings.
//
//   gen::StopStrings stop({"\n\n", "THE END"});
//   for (each sampled token) {
//     bool done = false;
//     emit(stop.push(tok.id_to_string(t), done));   // what is safe to show now
//     if (done) break;                              // a stop string completed: the text ends before it
//   }
//   emit(stop.finish());                            // end of the sample: what was held back
//
// Text that could be the start of a stop string is held back until the next pieces show it is
// not (or it completes one), so the emitted text never contains any part of a stop string, and
// the concatenation of everything emitted is the sample's text up to the first stop string
// (OpenAI's `stop`, llama.cpp's antiprompts). Empty stop strings are an error.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace atto::gen {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);  // atto::Error for an empty string

  // Adds the next piece of text; returns the text now known to precede any stop string. Sets
  // `done` when a stop string completed (the returned text ends where it began); after that
  // the sample is over and push must not be called again.
  std::string push(std::string_view piece, bool& done);
  // The held-back text at the end of a sample that no stop string ended.
  std::string finish();
  bool empty() const { return stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;
};

}  // namespace atto::gen
