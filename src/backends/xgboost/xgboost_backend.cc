// XGBoost backend through the C API, reading models laid out as Triton's FIL backend expects:
// backend "fil", <version>/xgboost.json | xgboost.ubj | xgboost.model chosen by the parameter
// model_type (xgboost_json | xgboost_ubj | xgboost), one FP32 input [num_features] and one FP32
// output. Parameters (as FIL): output_class (classifier), predict_proba (probabilities of every
// class rather than the class index), threshold (binary decision threshold, default 0.5).
//
// Threads: one Booster per instance with nthread=1, one call at a time (its instance
// thread, or an I/O thread running a batch inline).
#include <rapidjson/document.h>
#include <xgboost/c_api.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "backends/xgboost/xgboost_json_check.h"
#include "common/logging.h"
#include "dais/backend.h"
#include "runtime/model_config.h"

namespace dais::backends {
namespace {

// XGBoost's last error without the stack trace it appends.
std::string LastError() {
  std::string e = XGBGetLastError();
  auto pos = e.find("\nStack trace");
  if (pos != std::string::npos) e.resize(pos);
  while (!e.empty() && (e.back() == '\n' || e.back() == ' ')) e.pop_back();
  return e;
}

Status XgbError(const std::string& what) { return InvalidArgument(what + ": " + LastError()); }

std::string ModelFile(const inference::ModelConfig& config, std::string* type) {
  *type = runtime::ConfigParameter(config, "model_type");
  if (type->empty()) *type = "xgboost_json";
  if (!config.default_model_filename().empty()) return config.default_model_filename();
  if (*type == "xgboost_ubj") return "xgboost.ubj";
  if (*type == "xgboost") return "xgboost.model";
  return "xgboost.json";
}

struct BoosterInfo {
  BoosterHandle handle = nullptr;
  int64_t num_features = 0;
  int64_t num_class = 1;  // 1 for binary and regression
  std::string objective;
};

StatusOr<BoosterInfo> LoadBooster(const std::string& version_dir,
                                  const inference::ModelConfig& config) {
  std::string type;
  std::string file = ModelFile(config, &type);
  if (type != "xgboost_json" && type != "xgboost_ubj" && type != "xgboost") {
    return InvalidArgument("parameter model_type '" + type +
                           "' is not supported (xgboost_json, xgboost_ubj, xgboost)");
  }
  std::string path = version_dir + "/" + file;
  if (!std::filesystem::exists(path)) {
    return InvalidArgument("model file '" + path + "' does not exist");
  }
  // Model files are untrusted: libxgboost trusts their tree indices (a bad one segfaults or
  // hangs it, xgboost_json_check.h), so a JSON model is checked before the library reads it.
  if (type == "xgboost_json") {
    std::ifstream in(path, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) return InvalidArgument("cannot read model file '" + path + "'");
    if (Status s = CheckXgboostModelJson(text); !s.ok()) {
      return InvalidArgument("XGBoost model '" + path + "' is malformed: " + s.message());
    }
  }
  BoosterInfo info;
  if (XGBoosterCreate(nullptr, 0, &info.handle) != 0) return XgbError("XGBoosterCreate");
  if (XGBoosterLoadModel(info.handle, path.c_str()) != 0) {
    Status s = XgbError("cannot load XGBoost model '" + path + "'");
    XGBoosterFree(info.handle);
    return s;
  }
  if (type != "xgboost_json") {
    // UBJSON and the legacy binary format cannot be checked before the load (a crash there is
    // contained by --model-load-isolation); the trees are checked once loaded, before any
    // prediction walks them.
    bst_ulong len = 0;
    const char* dumped = nullptr;
    Status s = XGBoosterSaveModelToBuffer(info.handle, R"({"format":"json"})", &len, &dumped) == 0
                   ? CheckXgboostModelJson(std::string_view(dumped, len))
                   : XgbError("cannot read back XGBoost model '" + path + "'");
    if (!s.ok()) {
      XGBoosterFree(info.handle);
      return InvalidArgument("XGBoost model '" + path + "' is malformed: " + s.message());
    }
  }
  XGBoosterSetParam(info.handle, "nthread", "1");
  bst_ulong nf = 0;
  if (XGBoosterGetNumFeature(info.handle, &nf) != 0) {
    XGBoosterFree(info.handle);
    return XgbError("XGBoosterGetNumFeature");
  }
  info.num_features = static_cast<int64_t>(nf);
  bst_ulong len = 0;
  const char* json = nullptr;
  if (XGBoosterSaveJsonConfig(info.handle, &len, &json) == 0) {
    rapidjson::Document d;
    d.Parse(json, len);
    if (!d.HasParseError() && d.HasMember("learner")) {
      const auto& learner = d["learner"];
      if (learner.HasMember("learner_model_param") &&
          learner["learner_model_param"].HasMember("num_class")) {
        int64_t nc = std::atoll(learner["learner_model_param"]["num_class"].GetString());
        info.num_class = nc > 1 ? nc : 1;
      }
      if (learner.HasMember("objective") && learner["objective"].HasMember("name")) {
        info.objective = learner["objective"]["name"].GetString();
      }
    }
  }
  if (info.objective == "multi:softmax") {
    // softmax predicts a class index per row; softprob gives the per-class probabilities that
    // predict_proba and the argmax below need. Same trees, same classes.
    XGBoosterSetParam(info.handle, "objective", "multi:softprob");
  }
  return info;
}

class XgbInstance : public BackendInstance {
 public:
  XgbInstance(BoosterInfo info, bool output_class, bool predict_proba, float threshold,
              std::string output_name)
      : info_(std::move(info)),
        output_class_(output_class),
        predict_proba_(predict_proba),
        threshold_(threshold),
        output_name_(std::move(output_name)) {}
  ~XgbInstance() override { XGBoosterFree(info_.handle); }

  // Width of one output row.
  int64_t OutputWidth() const {
    if (output_class_ && !predict_proba_) return 1;
    if (output_class_ && predict_proba_) return info_.num_class > 1 ? info_.num_class : 2;
    return info_.num_class;
  }

  Status Execute(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) override {
    const Tensor& in = inputs[0];
    int64_t rows = in.shape.empty() ? 1 : in.shape[0];
    char iface[256];
    std::snprintf(iface, sizeof iface,
                  R"({"data":[%llu,true],"shape":[%lld,%lld],"typestr":"<f4","version":3})",
                  static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(in.data.data())),
                  static_cast<long long>(rows), static_cast<long long>(info_.num_features));
    const char* cfg =
        R"({"type":0,"training":false,"cache_id":0,"iteration_begin":0,"iteration_end":0,"strict_shape":true,"missing":NaN})";
    const bst_ulong* shape = nullptr;
    bst_ulong dim = 0;
    const float* result = nullptr;
    if (XGBoosterPredictFromDense(info_.handle, iface, cfg, nullptr, &shape, &dim, &result) != 0) {
      return Internal("XGBoost prediction failed: " + LastError());
    }
    bst_ulong total = 1;
    for (bst_ulong i = 0; i < dim; ++i) total *= shape[i];
    const int64_t per_row = rows > 0 ? static_cast<int64_t>(total) / rows : 0;
    const int64_t width = OutputWidth();
    const int64_t needed = !output_class_ ? width : (info_.num_class <= 1 ? 1 : info_.num_class);
    if (rows > 0 && per_row < needed) {
      return Internal("XGBoost returned " + std::to_string(per_row) + " values per row, " +
                      std::to_string(needed) + " expected");
    }
    Tensor out;
    out.name = output_name_;
    out.dtype = DataType::kFp32;
    out.shape = {rows, width};
    float* dst = reinterpret_cast<float*>(out.Allocate(rows * width * sizeof(float)));
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = result + r * per_row;
      if (!output_class_) {
        std::memcpy(dst + r * width, row, width * sizeof(float));
      } else if (info_.num_class <= 1) {  // binary: p = P(class 1)
        float p = row[0];
        if (predict_proba_) {
          dst[r * width] = 1.0f - p;
          dst[r * width + 1] = p;
        } else {
          dst[r * width] = p > threshold_ ? 1.0f : 0.0f;
        }
      } else if (predict_proba_) {
        std::memcpy(dst + r * width, row, width * sizeof(float));
      } else {
        int64_t best = 0;
        for (int64_t c = 1; c < per_row; ++c)
          if (row[c] > row[best]) best = c;
        dst[r * width] = static_cast<float>(best);
      }
    }
    outputs->clear();
    outputs->push_back(std::move(out));
    return OkStatus();
  }

 private:
  BoosterInfo info_;
  bool output_class_, predict_proba_;
  float threshold_;
  std::string output_name_;
};

bool BoolParam(const inference::ModelConfig& config, const std::string& key, bool dflt) {
  std::string v = runtime::ConfigParameter(config, key);
  if (v.empty()) return dflt;
  return v == "true" || v == "True" || v == "1";
}

class XgboostBackend : public Backend {
 public:
  std::string_view name() const override { return "fil"; }

  Status AutoComplete(const std::string& version_dir, inference::ModelConfig* config) override {
    ASSIGN_OR_RETURN(BoosterInfo info, LoadBooster(version_dir, *config));
    XGBoosterFree(info.handle);
    bool classifier =
        info.objective.rfind("binary:", 0) == 0 || info.objective.rfind("multi:", 0) == 0;
    auto& params = *config->mutable_parameters();
    if (!params.count("output_class"))
      params["output_class"].set_string_value(classifier ? "true" : "false");
    if (!params.count("predict_proba"))
      params["predict_proba"].set_string_value(classifier ? "true" : "false");
    bool output_class = BoolParam(*config, "output_class", false);
    bool proba = BoolParam(*config, "predict_proba", false);
    int64_t width =
        output_class ? (proba ? std::max<int64_t>(2, info.num_class) : 1) : info.num_class;
    if (config->max_batch_size() == 0) config->set_max_batch_size(kDefaultMaxBatch);
    auto* in = config->add_input();
    in->set_name("input__0");
    in->set_data_type(inference::TYPE_FP32);
    in->add_dims(info.num_features);
    auto* out = config->add_output();
    out->set_name("output__0");
    out->set_data_type(inference::TYPE_FP32);
    out->add_dims(width);
    return OkStatus();
  }

  StatusOr<std::unique_ptr<BackendInstance>> CreateInstance(const std::string& version_dir,
                                                            const inference::ModelConfig& config,
                                                            int index) override {
    if (config.input_size() != 1 || config.output_size() != 1) {
      return InvalidArgument("the fil backend takes exactly one input and one output");
    }
    const auto& in = config.input(0);
    const auto& out = config.output(0);
    if (in.data_type() != inference::TYPE_FP32 || out.data_type() != inference::TYPE_FP32) {
      return InvalidArgument("the fil backend's input and output must be TYPE_FP32");
    }
    if (config.max_batch_size() <= 0) {
      return InvalidArgument("the fil backend needs max_batch_size > 0 (rows are the batch)");
    }
    ASSIGN_OR_RETURN(BoosterInfo info, LoadBooster(version_dir, config));
    if (in.dims_size() != 1 || in.dims(0) != info.num_features) {
      XGBoosterFree(info.handle);
      return InvalidArgument("input '" + in.name() + "' must have dims [" +
                             std::to_string(info.num_features) +
                             "]: the model has that many features");
    }
    bool output_class = BoolParam(config, "output_class", false);
    bool proba = BoolParam(config, "predict_proba", false);
    float threshold = 0.5f;
    std::string t = runtime::ConfigParameter(config, "threshold");
    if (!t.empty()) threshold = std::strtof(t.c_str(), nullptr);
    auto inst = std::make_unique<XgbInstance>(info, output_class, proba, threshold, out.name());
    int64_t want = 1;
    for (int64_t d : out.dims()) want *= d;
    if (want != inst->OutputWidth()) {
      return InvalidArgument("output '" + out.name() + "' must have " +
                             std::to_string(inst->OutputWidth()) +
                             " elements per row for this model and parameters");
    }
    return std::unique_ptr<BackendInstance>(std::move(inst));
  }

 private:
  static constexpr int kDefaultMaxBatch = 64;
};

}  // namespace

std::unique_ptr<Backend> MakeXgboostBackend() { return std::make_unique<XgboostBackend>(); }

}  // namespace dais::backends
