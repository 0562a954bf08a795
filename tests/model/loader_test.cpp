// Checkpoint loading: HF save_pretrained names and config keys, sharded checkpoints, extra files,
// and clear errors (naming the tensor) for missing, unknown, mis-shaped and truncated input.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/io.h"
#include "common/json.h"
#include "fixture_util.h"
#include "model/model.h"

namespace deepinfer::model {
namespace {

namespace fs = std::filesystem;
using testing::fixture_dir;
using testing::max_abs_diff;
using testing::RawTensor;
using testing::Reference;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("deepinfer_model_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string str() const { return path_.string(); }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  fs::path path_;
};

std::map<std::string, RawTensor> b_tensors() {
  return testing::read_raw(fixture_dir("hf_v4_b") + "/model.safetensors");
}

void copy_config(const std::string& to) {
  fs::copy_file(fixture_dir("hf_v4_b") + "/config.json", to + "/config.json");
}

std::string load_error(const std::string& dir) {
  auto m = Model::load(dir);
  return m.ok() ? std::string("(loaded)") : m.error().message;
}

// Logits of hf_v4_b's reference rows from the model in `dir`; max-abs error vs the reference.
float b_reference_error(const std::string& dir) {
  auto m = Model::load(dir, {2});
  EXPECT_TRUE(m.ok()) << m.error().message;
  if (!m.ok()) return INFINITY;
  Reference ref = Reference::open(fixture_dir("hf_v4_b"));
  const auto ids = ref.i32("input_ids");
  const auto rows32 = ref.i32("rows");
  const auto want = ref.f32("logits");
  std::vector<int64_t> rows(rows32.begin(), rows32.end());
  const int V = m.value()->config().vocab_size;
  std::vector<float> got(rows.size() * V);
  SequenceState st = m.value()->new_state();
  EXPECT_TRUE(m.value()->forward(st, ids, rows, got.data()).ok());
  return max_abs_diff(got.data(), want.data(), got.size());
}

TEST(CanonicalName, HfSavePretrainedNames) {
  EXPECT_EQ(canonical_tensor_name("model.embed_tokens.weight"), "embed.weight");
  EXPECT_EQ(canonical_tensor_name("lm_head.weight"), "head.weight");
  EXPECT_EQ(canonical_tensor_name("head.weight"), "head.weight");
  EXPECT_EQ(canonical_tensor_name("model.norm.weight"), "norm.weight");
  EXPECT_EQ(canonical_tensor_name("model.hc_head.hc_fn"), "hc_head_fn");
  EXPECT_EQ(canonical_tensor_name("model.hc_head.hc_base"), "hc_head_base");
  EXPECT_EQ(canonical_tensor_name("model.hc_head.hc_scale"), "hc_head_scale");
  EXPECT_EQ(canonical_tensor_name("model.layers.3.attn.norm.weight"),
            "layers.3.attn.kv_norm.weight");
  EXPECT_EQ(canonical_tensor_name("model.layers.3.attn.compressor.norm.weight"),
            "layers.3.attn.compressor.norm.weight");
  EXPECT_EQ(canonical_tensor_name("model.layers.0.ffn.experts.2.w1.weight"),
            "layers.0.ffn.experts.2.w1.weight");
  EXPECT_EQ(canonical_tensor_name("layers.0.attn.wq_a.weight"), "layers.0.attn.wq_a.weight");
}

// HF's own layout (names listed by save_pretrained, HF config keys) gives hf_v4_b's logits.
TEST(Loader, HfSavePretrainedLayout) {
  TempDir dir;
  auto names = parse_json(read_file(fixture_dir("hf_v4_b_hflayout") + "/tensors.json").value());
  ASSERT_TRUE(names.ok());
  auto published = b_tensors();
  std::map<std::string, RawTensor> hf;
  for (const auto& kv : names.value().as_object()) {
    const std::string name(kv.key());
    auto it = published.find(canonical_tensor_name(name));
    ASSERT_NE(it, published.end()) << name;
    EXPECT_EQ(kv.value().as_array()[0].as_string(), it->second.dtype) << name;
    hf[name] = it->second;
  }
  EXPECT_EQ(hf.size(), published.size());
  testing::write_file(dir.str() + "/model.safetensors", testing::safetensors_image(hf));
  fs::copy_file(fixture_dir("hf_v4_b_hflayout") + "/config.json", dir.str() + "/config.json");
  auto cfg = load_model_config(dir.str());
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg.value().compress_ratios, (std::vector<int>{0, 4, 128, 4}));
  EXPECT_EQ(cfg.value().hash_routed, (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(cfg.value().rope_dim, 64);
  EXPECT_TRUE(cfg.value().compress_rope.yarn);
  EXPECT_LE(b_reference_error(dir.str()), 1e-3f);
}

// A sharded checkpoint (index + two files) with extra files and folders beside it.
TEST(Loader, ShardedCheckpointAndExtraFiles) {
  TempDir dir;
  auto all = b_tensors();
  std::map<std::string, RawTensor> a, b;
  std::string map = "{\"metadata\":{},\"weight_map\":{";
  bool first = true;
  int i = 0;
  for (auto& [name, t] : all) {
    const bool to_a = (i++ % 2) == 0;
    (to_a ? a : b)[name] = t;
    map += (first ? "\"" : ",\"") + name + "\":\"" +
           (to_a ? "m-1.safetensors" : "m-2.safetensors") + "\"";
    first = false;
  }
  map += "}}";
  testing::write_file(dir.str() + "/m-1.safetensors", testing::safetensors_image(a));
  testing::write_file(dir.str() + "/m-2.safetensors", testing::safetensors_image(b));
  testing::write_file(dir.str() + "/model.safetensors.index.json", map);
  testing::write_file(dir.str() + "/notes.txt", "extra");
  testing::write_file(dir.str() + "/reference.safetensors", "not even a safetensors file");
  fs::create_directories(dir.str() + "/original/sub");
  copy_config(dir.str());
  EXPECT_LE(b_reference_error(dir.str()), 1e-3f);
}

TEST(Loader, MissingTensorIsNamed) {
  TempDir dir;
  auto t = b_tensors();
  t.erase("layers.2.attn.compressor.ape");
  testing::write_file(dir.str() + "/model.safetensors", testing::safetensors_image(t));
  copy_config(dir.str());
  EXPECT_EQ(load_error(dir.str()), "missing tensor layers.2.attn.compressor.ape");
}

TEST(Loader, UnknownTensorIsNamed) {
  TempDir dir;
  auto t = b_tensors();
  t["layers.1.attn.mystery.weight"] = t["norm.weight"];
  testing::write_file(dir.str() + "/model.safetensors", testing::safetensors_image(t));
  copy_config(dir.str());
  EXPECT_NE(load_error(dir.str()).find("unknown tensor layers.1.attn.mystery.weight"),
            std::string::npos);
}

TEST(Loader, MisShapedTensorIsNamed) {
  TempDir dir;
  auto t = b_tensors();
  RawTensor& w = t["layers.0.attn.wkv.weight"];
  w.shape = {w.shape[1], w.shape[0]};
  testing::write_file(dir.str() + "/model.safetensors", testing::safetensors_image(t));
  copy_config(dir.str());
  EXPECT_EQ(load_error(dir.str()),
            "tensor layers.0.attn.wkv.weight has shape [224, 128], expected [128, 224]");
}

TEST(Loader, TruncatedAndMalformedFiles) {
  const std::string image = testing::safetensors_image(b_tensors());
  for (size_t cut :
       {size_t{0}, size_t{5}, size_t{8}, size_t{100}, image.size() / 2, image.size() - 1}) {
    auto r = SafetensorsFile::parse(reinterpret_cast<const uint8_t*>(image.data()), cut, "m");
    EXPECT_FALSE(r.ok()) << cut;
  }
  std::string bad = image;
  bad[8] = '!';  // the JSON header's opening brace
  EXPECT_FALSE(
      SafetensorsFile::parse(reinterpret_cast<const uint8_t*>(bad.data()), bad.size(), "m").ok());
  TempDir dir;
  testing::write_file(dir.str() + "/model.safetensors", image.substr(0, image.size() - 3));
  copy_config(dir.str());
  EXPECT_NE(load_error(dir.str()).find("runs past the end of the file"), std::string::npos);
}

TEST(Loader, NoCheckpointOrConfig) {
  TempDir dir;
  EXPECT_NE(load_error(dir.str()).find("config.json"), std::string::npos);
  copy_config(dir.str());
  EXPECT_NE(load_error(dir.str()).find("neither model.safetensors"), std::string::npos);
}

TEST(Forward, RejectsOutOfRangeIdsAndRows) {
  auto m = Model::load(fixture_dir("hf_v4_b"));
  ASSERT_TRUE(m.ok());
  SequenceState st = m.value()->new_state();
  const std::vector<int32_t> ids = {5, 640};
  const std::vector<int64_t> rows = {0};
  std::vector<float> lg(640);
  EXPECT_FALSE(m.value()->forward(st, ids, rows, lg.data()).ok());
  const std::vector<int32_t> ok_ids = {5, 6};
  const std::vector<int64_t> bad_rows = {2};
  EXPECT_FALSE(m.value()->forward(st, ok_ids, bad_rows, lg.data()).ok());
  EXPECT_EQ(st.position, 0);
}

}  // namespace
}  // namespace deepinfer::model
