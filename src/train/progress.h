// atto/train/progress.h: one updating status line on a terminal, plain lines otherwise.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace atto {

class Progress {
 public:
  // out == nullptr: silent. On a terminal the line is redrawn in place ("\r"); otherwise one
  // line is printed per call to step().
  explicit Progress(std::FILE* out);
  void step(const std::string& line);  // the current status
  void message(const std::string& line);  // a permanent line (evaluation result, warning)
  void finish();                        // end the updating line
  bool is_terminal() const { return tty_; }

 private:
  std::FILE* out_;
  bool tty_ = false;
  bool open_line_ = false;
};

std::string format_duration(double seconds);  // "1h02m", "3m05s", "12.3s"
// "90", "90s", "5m", "1h30m", "2.5m" -> seconds (> 0); anything else throws atto::Error naming `what`.
double parse_duration(const std::string& text, const std::string& what);

}  // namespace atto
