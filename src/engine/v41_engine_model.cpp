// load_engine_model: V4 or V4.1 from config.json.
#include "engine/v41_engine_model.h"

#include "common/io.h"
#include "common/json.h"
#include "engine/v41_model_runner.h"
#include "engine/v4_model_runner.h"
#include "model/v41_config.h"

namespace deepinfer::engine {

bool is_v41_model_folder(const std::string& dir) {
  auto text = read_file(dir + "/config.json");
  if (!text.ok()) return false;
  auto json = parse_json(text.value());
  return json.ok() && model::v41::is_v41_config(json.value());
}

Result<EngineModel> load_engine_model(const std::string& dir, int threads, bool v4_runner) {
  EngineModel out;
  if (is_v41_model_folder(dir)) {
    auto m = model::v41::V41Model::load(dir, {threads});
    if (!m.ok()) return m.error();
    out.v41 = std::move(m.value());
    const model::v41::V41Config& c = out.v41->config();
    out.vocab_size = c.vocab_size;
    out.num_layers = c.num_layers;
    out.bos_token_id = c.bos_token_id;
    out.eos_token_ids = c.eos_token_ids;
    out.notes = out.v41->notes();
    out.runner = std::make_unique<V41ModelRunner>(*out.v41);
    return out;
  }
  auto m = model::Model::load(dir, {threads});
  if (!m.ok()) return m.error();
  out.v4 = std::move(m.value());
  const model::ModelConfig& c = out.v4->config();
  out.vocab_size = c.vocab_size;
  out.num_layers = c.num_layers;
  out.bos_token_id = c.bos_token_id;
  for (int id : c.eos_token_ids) out.eos_token_ids.push_back(id);
  if (v4_runner) out.runner = std::make_unique<V4ModelRunner>(*out.v4);
  return out;
}

}  // namespace deepinfer::engine
