// config.json (run/run_config.h): every key's type and range, then the model's own checks.
#include "base/json.h"
#include "common.h"
#include "run/run_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The same parse as every config.json and --config (base/json.h: depth-limited, errors named).
  nlohmann::json j;
  try {
    j = atto::json_util::parse(atto::fuzz::bytes(data, size), "fuzz config.json");
  } catch (const atto::Error&) {
    return 0;
  }
  atto::fuzz::expect_errors([&] {
    const atto::RunConfig c = atto::run_config_from_json(j, "fuzz config.json");
    c.train.validate();
    (void)atto::to_json(c).dump();
  });
  atto::fuzz::expect_errors([&] {
    atto::RunConfig c = atto::default_run_config(atto::Task::Gpt);
    atto::apply_config_json(c, j, "fuzz --config");
  });
  return 0;
}
