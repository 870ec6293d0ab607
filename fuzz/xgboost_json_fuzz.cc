// Fuzzes CheckXgboostModelJson, the gate in front of libxgboost's JSON model loader.
//
// Input: an xgboost.json file. A crash, sanitizer report or hang in the check is a finding; so is
// a model it accepts that would make XGBoost index outside a tree: for every accepted tree this
// target walks the nodes the way XGBoost's loader and predictor do (parents of every node, then
// children from the root) and aborts on an index out of range, a split on a missing feature or a
// walk longer than the tree. It reads the document as XGBoost does: of two equal keys, the last.
#include <rapidjson/document.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "backends/xgboost/xgboost_json_check.h"

namespace {

using Json = rapidjson::Value;

// A failed invariant is a finding: abort so libFuzzer records the input.
void Require(bool condition) {
  if (!condition) std::abort();
}

// object[key] as XGBoost's reader sees it: the last member of that name (null if none).
const Json* Find(const Json& object, std::string_view key) {
  const Json* found = nullptr;
  for (const auto& m : object.GetObject()) {
    if (std::string_view(m.name.GetString(), m.name.GetStringLength()) == key) found = &m.value;
  }
  return found;
}

const Json& At(const Json& object, std::string_view key) {
  const Json* found = Find(object, key);
  Require(found != nullptr);
  return *found;
}

int64_t Param(const Json& object, const char* key) {
  return std::strtoll(At(object, key).GetString(), nullptr, 10);
}

// Walks one accepted tree as XGBoost would, trusting nothing but the check.
void WalkAsXgboost(const Json& tree, int64_t num_feature) {
  const int64_t n = Param(At(tree, "tree_param"), "num_nodes");
  const Json& left = At(tree, "left_children");
  const Json& right = At(tree, "right_children");
  const Json& parents = At(tree, "parents");
  for (int64_t i = 1; i < n; ++i) {  // RegTree::LoadModel: self[parent] for every node
    const int64_t parent = parents[i].GetInt64();
    Require(parent >= 0 && parent < n);
  }
  int64_t steps = 0;
  std::vector<int64_t> pending = {0};
  while (!pending.empty()) {
    const int64_t node = pending.back();
    pending.pop_back();
    Require(node >= 0 && node < n && ++steps <= n);
    const int64_t l = left[node].GetInt64();
    const int64_t r = right[node].GetInt64();
    if (l == -1) {
      Require(r == -1);
      continue;
    }
    const int64_t feature = At(tree, "split_indices")[node].GetInt64();
    Require(feature >= 0 && feature < num_feature);
    pending.push_back(l);
    pending.push_back(r);
  }
}

void CheckAccepted(std::string_view text) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseNanAndInfFlag>(text.data(), text.size());
  Require(!doc.HasParseError() && doc.IsObject());
  const Json& learner = At(doc, "learner");
  const Json& param = At(learner, "learner_model_param");
  const int64_t num_feature = Param(param, "num_feature");
  Require(num_feature >= 1);
  int64_t groups = std::max<int64_t>(1, Param(param, "num_class"));
  if (Find(param, "num_target") != nullptr) groups = std::max(groups, Param(param, "num_target"));
  const Json* booster = &At(learner, "gradient_booster");
  const std::string_view name = At(*booster, "name").GetString();
  if (name == "gblinear") return;
  if (name == "dart") booster = &At(*booster, "gbtree");
  const Json& model = At(*booster, "model");
  const Json& trees = At(model, "trees");
  const Json& info = At(model, "tree_info");
  Require(info.Size() == trees.Size());
  for (rapidjson::SizeType i = 0; i < trees.Size(); ++i) {
    Require(info[i].GetInt64() >= 0 && info[i].GetInt64() < groups);  // an output column
    Require(At(trees[i], "id").GetInt64() == static_cast<int64_t>(i));
    WalkAsXgboost(trees[i], num_feature);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  dais::Status status = dais::backends::CheckXgboostModelJson(text);
  if (!status.ok()) {
    Require(status.code() == dais::StatusCode::kInvalidArgument && !status.message().empty());
    return 0;
  }
  CheckAccepted(text);
  return 0;
}
