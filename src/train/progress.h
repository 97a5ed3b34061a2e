// atto/train/progress.h: one updating status line on a terminal, plain lines otherwise.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "base/duration.h"  // format_duration, parse_duration (the progress line and --time)

namespace atto {

class Progress {
 public:
  // out == nullptr: silent. On a terminal the line is redrawn in place ("\r"); otherwise one
  // line is printed per call to step().
  explicit Progress(std::FILE* out);
  void step(const std::string& line);     // the current status
  void message(const std::string& line);  // a permanent line (evaluation result, warning)
  void finish();                          // end the updating line
  bool is_terminal() const { return tty_; }

 private:
  std::FILE* out_;
  bool tty_ = false;
  bool open_line_ = false;
};

}  // namespace atto
