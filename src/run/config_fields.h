// atto/run/config_fields.h: every configuration key of a run, declared once.
//
// One row per key: where it lives in config.json (section and key), the task that uses it, its
// command-line flag, the help text, how --help shows the default, and whether --resume may
// change it. config.json reading and writing (run_config.h), `atto train`'s flags and --help,
// and the resume rules all come from this table, so they cannot drift apart.
//
//   for (const ConfigField& f : config_fields())
//     if (f.flag) app->add_option(f.flag, ..., f.help);     // the CLI registers each flag once
//   apply_flags(cfg, resume, [&](const std::string& flag) { return value_if_given(flag); });
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "run/run_config.h"

namespace atto {

enum class Section { Model, Data, Train };
const char* to_string(Section s);  // "model", "data", "train"

// How a flag's text becomes the field's value.
enum class ValueKind {
  Int,       // "64"
  Float,     // "3e-4"
  Bool,      // a switch: "true" when given, "false" for its --no- form
  Text,      // any string
  Choice,    // one of a set of names (the field's parse names them in its error)
  Duration,  // "90s", "5m", "1h30m" -> seconds
};

struct ConfigField {
  const char* key;  // the config.json key inside its section
  Section section;
  std::optional<Task> task;    // the task that uses it; nullopt: both
  const char* flag = nullptr;  // its own flag in CLI11's form ("--bias,!--no-bias"); nullptr: none
  // A broader flag that sets this field when its own flag is absent: --n-layers sets a seq2seq
  // model's encoder and decoder depth, --shared-vocab also shares the embeddings.
  const char* fallback_flag = nullptr;
  ValueKind kind = ValueKind::Text;
  const char* help = "";
  const char* default_str = nullptr;  // how --help shows the default; nullptr: the default value
  bool on_resume = false;             // may a flag change it when resuming a run
  std::function<nlohmann::json(const RunConfig&)> get;
  std::function<void(RunConfig&, const nlohmann::json&)> set;  // atto::Error on a wrong type or value
  std::function<void(RunConfig&)> flag_also;                   // what giving the flag also does (--time plans --steps)
};

const std::vector<ConfigField>& config_fields();

// The flag's name without CLI11's alternatives: "--bias,!--no-bias" -> "--bias".
std::string flag_name(const char* flag);

// How --help shows the field's default (the default of the task that uses it; gpt's when both).
std::string default_text(const ConfigField& f);

// Sets every field whose flag was given. `value_of(name)` returns the text of the flag `name`
// ("--d-model"), or nullopt when it was not given; a switch gives "true" or "false". Throws
// atto::UsageError for a flag the run's task does not use, and, when `resume`, for a flag that
// the run's config.json fixes (the message lists the flags --resume allows); atto::Error naming
// the flag for a value that does not parse or is out of range.
void apply_flags(RunConfig& cfg, bool resume,
                 const std::function<std::optional<std::string>(const std::string& name)>& value_of);

// The rules of a new run and of a resumed one, for every caller (atto train, the C API):
// - a resumed run's config.json fixes every key but a few (steps, threads, eval_every, ...):
//   changeable_on_resume(key) says which; refuse_on_resume throws atto::UsageError "WHAT cannot
//   be changed when resuming (...)", listing what may change, as flags or as config keys;
// - a new run needs its data: a GPT "data" (the training text), a seq2seq run "src" and "tgt"
//   (or "data", a .tsv file). `name(key)` writes a key as the caller's user gives it ("--data",
//   or "\"data\"" in a JSON object); atto::UsageError otherwise.
bool changeable_on_resume(const std::string& key);
[[noreturn]] void refuse_on_resume(const std::string& what, bool list_flags);
void check_new_run_inputs(const RunConfig& cfg, const std::function<std::string(const std::string& key)>& name);

}  // namespace atto
