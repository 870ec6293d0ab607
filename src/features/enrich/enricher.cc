#include "features/enrich/enricher.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>

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

// Fills one row of a knn input: the neighbours' integer ids (-1 pads) or scores (0 pads),
// converted to the input's datatype. A row whose query feature was not found has none.
Status FillKnnRow(const LookupResult& res, size_t row, const InputMapping& m, const KnnSearch& knn,
                  std::map<std::pair<int, size_t>, std::vector<KnnHit>>* memo, DataType dtype,
                  char* dst) {
  const FeatureSpec& spec = *res.spec;
  const KnnSpec& k = spec.knn[static_cast<size_t>(m.knn)];
  auto found = memo->find({m.knn, row});
  if (found == memo->end()) {
    std::vector<KnnHit> hits;
    const size_t g =
        std::find(res.groups.begin(), res.groups.end(), k.query.group) - res.groups.begin();
    const FeatureStatus status = res.statuses[res.Index(row, g)];
    if (status == FeatureStatus::kPresent || status == FeatureStatus::kStale) {
      if (!knn) {
        return FailedPrecondition(fmt::format(
            "knn {}: this server has no vector memory (start it with --memory)", k.name));
      }
      const FeatureDef& f = spec.groups[k.query.group].features[k.query.feature];
      std::vector<float> query(static_cast<size_t>(f.elements));
      std::string_view v = res.Value(row, g, k.query.feature, /*stale_ok=*/true);
      RETURN_IF_ERROR(ConvertElements(f.dtype, v.data(), DataType::kFp32,
                                      reinterpret_cast<char*>(query.data()), f.elements));
      auto searched = knn(k, std::move(query));
      if (!searched.ok()) {
        return Status(searched.status().code(),
                      fmt::format("knn {}: {}", k.name, searched.status().message()));
      }
      hits = std::move(*searched);
    }
    found = memo->emplace(std::make_pair(m.knn, row), std::move(hits)).first;
  }
  const std::vector<KnnHit>& hits = found->second;
  if (m.knn_scores) {
    std::vector<float> scores(static_cast<size_t>(k.k), 0.0f);
    for (size_t i = 0; i < hits.size() && i < scores.size(); ++i) scores[i] = hits[i].score;
    return ConvertElements(DataType::kFp32, reinterpret_cast<const char*>(scores.data()), dtype,
                           dst, k.k);
  }
  std::vector<int64_t> ids(static_cast<size_t>(k.k), -1);
  for (size_t i = 0; i < hits.size() && i < ids.size(); ++i) {
    const std::string& id = hits[i].id;
    if (std::from_chars(id.data(), id.data() + id.size(), ids[i]).ec != std::errc()) {
      return InvalidArgument(fmt::format(
          "knn {}: point \"{}\" of collection {} has no integer id (output ids needs them)", k.name,
          id, k.collection));
    }
  }
  return ConvertElements(DataType::kInt64, reinterpret_cast<const char*>(ids.data()), dtype, dst,
                         k.k);
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
    if (m.knn >= 0) {
      const size_t g = spec->knn[static_cast<size_t>(m.knn)].query.group;
      if (std::find(lr.groups.begin(), lr.groups.end(), g) == lr.groups.end()) {
        lr.groups.push_back(g);
      }
    }
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
  store_->Lookup(
      std::move(lr), [shared, version, knn = knn_, next = std::move(next)](LookupResult res) {
        runtime::RequestPtr req = std::move(*shared);
        const FeatureSpec& spec = *res.spec;
        std::map<std::pair<int, size_t>, std::vector<KnnHit>> knn_memo;
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
            if (m.knn >= 0) {
              Status s = FillKnnRow(res, row, m, knn, &knn_memo, t.dtype, dst);
              if (!s.ok()) return req->on_complete(s);
              dst += static_cast<size_t>(m.elements) * width;
              continue;
            }
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
