#include "train/progress.h"

#include <unistd.h>

#include <fmt/format.h>

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

std::string format_duration(double s) {
  if (!(s >= 0)) return "?";
  if (s < 60) return fmt::format("{:.1f}s", s);
  const auto total = static_cast<int64_t>(s + 0.5);
  if (total < 3600) return fmt::format("{}m{:02}s", total / 60, total % 60);
  return fmt::format("{}h{:02}m", total / 3600, (total % 3600) / 60);
}

}  // namespace atto
