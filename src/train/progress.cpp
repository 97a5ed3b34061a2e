#include "train/progress.h"

#include <unistd.h>

#include <cmath>
#include <string>

#include <fmt/format.h>

#include "base/error.h"

namespace atto {

Progress::Progress(std::FILE* out) : out_(out), tty_(out && isatty(fileno(out))) {}

void Progress::step(const std::string& line) {
  if (!out_) return;
  if (tty_) {
    fmt::print(out_, "\r\033[K{}", line);
    open_line_ = true;
  } else {
    fmt::print(out_, "{}\n", line);
  }
  std::fflush(out_);
}

void Progress::message(const std::string& line) {
  if (!out_) return;
  if (open_line_) fmt::print(out_, "\r\033[K");
  open_line_ = false;
  fmt::print(out_, "{}\n", line);
  std::fflush(out_);
}

void Progress::finish() {
  if (out_ && open_line_) fmt::print(out_, "\n");
  open_line_ = false;
  if (out_) std::fflush(out_);
}

}  // namespace atto
