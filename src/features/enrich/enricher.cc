#include "features/enrich/enricher.h"

#include <algorithm>
#include <cstring>

#include "dais/clock.h"
#include "features/spec/feature_codec.h"
#include "fmt/format.h"
#include "runtime/tensor_config.h"

namespace dais::features {
namespace {

StatusOr<std::vector<std::string>> IdsFromTensor(const Tensor& t) {
  std::vector<std::string> ids;
  int64_t n = ElementCount(t.shape);
  if (t.shape.empty() || t.shape.size() > 2 || (t.shape.size() == 2 && t.shape[1] != 1) || n < 0) {
    return InvalidArgument(fmt::format("entity id input '{}' must have shape [n] or [n,1], got {}",
                                       t.name, ShapeToString(t.shape)));
  }
  if (t.dtype == DataType::kInt64 || t.dtype == DataType::kInt32) {
    if (static_cast<int64_t>(t.data.size()) != n * static_cast<int64_t>(DataTypeSize(t.dtype))) {
      return InvalidArgument(fmt::format("entity id input '{}' has the wrong byte size", t.name));
    }
    for (int64_t i = 0; i < n; ++i)
      ids.push_back(std::to_string(ElementAsInt(t.dtype, t.data.data(), i)));
    return ids;
  }
  if (t.dtype == DataType::kBytes) {
    std::string_view d = t.data;
    while (!d.empty()) {
      uint32_t len;
      if (d.size() < 4) break;
      std::memcpy(&len, d.data(), 4);
      if (d.size() - 4 < len) break;
      ids.emplace_back(d.substr(4, len));
      d.remove_prefix(4 + len);
    }
    if (!d.empty() || static_cast<int64_t>(ids.size()) != n) {
      return InvalidArgument(
          fmt::format("entity id input '{}' is not {} BYTES elements", t.name, n));
    }
    return ids;
  }
  return InvalidArgument(fmt::format("entity id input '{}' must be INT64, INT32 or BYTES, got {}",
                                     t.name, DataTypeName(t.dtype)));
}

}  // namespace

void Enricher::Enrich(runtime::RequestPtr request, std::shared_ptr<runtime::ModelVersion> version,
                      std::function<void(runtime::RequestPtr)> next) {
  FeatureSpecPtr spec = version->features();
  const auto& config = version->config();
  std::vector<std::string> raw = request->entity_ids;
  if (!spec->entity_input.empty()) {
    auto it = std::find_if(request->inputs.begin(), request->inputs.end(),
                           [&](const Tensor& t) { return t.name == spec->entity_input; });
    if (it != request->inputs.end()) {
      auto ids = IdsFromTensor(*it);
      if (!ids.ok()) return request->on_complete(ids.status());
      raw = std::move(ids).value();
      bool model_input = std::any_of(config.input().begin(), config.input().end(),
                                     [&](const auto& in) { return in.name() == it->name; });
      if (!model_input) request->inputs.erase(it);
    }
  }
  if (raw.empty()) {
    std::string inputs;
    for (const auto& m : spec->inputs) inputs += (inputs.empty() ? "" : ", ") + m.input;
    return request->on_complete(InvalidArgument(fmt::format(
        "model '{}' fills [{}] from features: send entity ids in {}parameters.entity_ids, or "
        "send those inputs",
        config.name(), inputs,
        spec->entity_input.empty() ? "" : "input '" + spec->entity_input + "' or ")));
  }
  if (config.max_batch_size() > 0 && static_cast<int64_t>(raw.size()) > config.max_batch_size()) {
    return request->on_complete(
        InvalidArgument(fmt::format("{} entity ids exceed the model's max_batch_size {}",
                                    raw.size(), config.max_batch_size())));
  }
  const EntitySpec* entity = spec->FindEntity(spec->entity);
  LookupRequest lr;
  lr.spec = spec;
  auto& ids = lr.entities[spec->entity];
  for (size_t i = 0; i < raw.size(); ++i) {
    auto id = CanonicalEntityId(entity->key_type, raw[i]);
    if (!id.ok()) {
      return request->on_complete(InvalidArgument(
          fmt::format("entity id {} (entity {}): {}", i, entity->name, id.status().message())));
    }
    ids.push_back(std::move(id).value());
  }
  for (const auto& m : spec->inputs) {
    for (const auto& r : m.refs) {
      if (std::find(lr.groups.begin(), lr.groups.end(), r.group) == lr.groups.end()) {
        lr.groups.push_back(r.group);
      }
    }
  }
  if (request->timeout_us > 0) {
    auto d = std::chrono::steady_clock::now() + std::chrono::microseconds(request->timeout_us);
    lr.deadline = std::min(d, std::chrono::steady_clock::now() + store_->options().lookup_timeout);
  }
  auto shared = std::make_shared<runtime::RequestPtr>(std::move(request));
  store_->Lookup(std::move(lr), [shared, version, next = std::move(next)](LookupResult res) {
    runtime::RequestPtr req = std::move(*shared);
    const FeatureSpec& spec = *res.spec;
    const auto& config = version->config();
    for (const auto& m : spec.inputs) {
      const inference::ModelInput* in = nullptr;
      for (const auto& i : config.input()) {
        if (i.name() == m.input) in = &i;
      }
      Tensor t;
      t.name = m.input;
      t.dtype = runtime::ConfigDataType(in->data_type());
      t.shape.push_back(static_cast<int64_t>(res.rows));
      for (int64_t d : in->dims()) t.shape.push_back(d);
      size_t width = DataTypeSize(t.dtype);
      char* dst = t.Allocate(res.rows * static_cast<size_t>(m.elements) * width);
      for (size_t row = 0; row < res.rows; ++row) {
        for (const auto& ref : m.refs) {
          size_t g =
              std::find(res.groups.begin(), res.groups.end(), ref.group) - res.groups.begin();
          const FeatureDef& f = spec.groups[ref.group].features[ref.feature];
          std::string_view v = res.Value(row, g, ref.feature, /*stale_ok=*/false);
          Status s = ConvertElements(f.dtype, v.data(), t.dtype, dst, f.elements);
          if (!s.ok()) return req->on_complete(s);
          dst += static_cast<size_t>(f.elements) * width;
        }
      }
      req->inputs.push_back(std::move(t));
    }
    // One status per row: the worst over the row's groups (PRESENT < STALE < NOT_FOUND <
    // DEFAULTED).
    std::string statuses;
    for (size_t row = 0; row < res.rows; ++row) {
      FeatureStatus worst = FeatureStatus::kPresent;
      for (size_t g = 0; g < res.groups.size(); ++g) {
        worst = std::max(worst, res.statuses[res.Index(row, g)]);
      }
      statuses += (row ? "," : "") + std::string(FeatureStatusName(worst));
    }
    req->response_parameters.emplace_back("feature_status", std::move(statuses));
    next(std::move(req));
  });
}

}  // namespace dais::features
