// config.json (run/run_config.h): every key's type and range, then the model's own checks.
#include "common.h"
#include "run/run_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
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
