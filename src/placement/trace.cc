#include "placement/trace.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string_view>
#include <unordered_map>

namespace dais::placement {
namespace {

constexpr int kMaxGpusPerNode = 16;

std::vector<std::string_view> SplitCsv(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    out.push_back(line.substr(start, comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

// One CSV file: its columns by name, then each row checked against them.
class Table {
 public:
  Table(const std::string& text, std::string name) : name_(std::move(name)), in_(text) {}

  Status Header(const std::vector<std::string>& required) {
    std::string line;
    if (!std::getline(in_, line)) return InvalidArgument(name_ + ": empty file, no header");
    if (!line.empty() && line.back() == '\r') line.pop_back();
    header_ = line;
    auto cols = SplitCsv(header_);
    for (size_t i = 0; i < cols.size(); ++i) index_[std::string(cols[i])] = i;
    for (const std::string& r : required) {
      if (!index_.count(r)) {
        return InvalidArgument(name_ + ":1: no column '" + r + "' in the header");
      }
    }
    return OkStatus();
  }
  bool Has(const std::string& column) const { return index_.count(column) > 0; }

  // The next non-empty row; false at the end.
  bool Next() {
    while (std::getline(in_, row_)) {
      ++line_;
      if (!row_.empty() && row_.back() == '\r') row_.pop_back();
      if (row_.empty()) continue;
      fields_ = SplitCsv(row_);
      return true;
    }
    return false;
  }
  Status RowError(const std::string& what) const {
    return InvalidArgument(name_ + ":" + std::to_string(line_) + ": " + what);
  }
  StatusOr<std::string_view> Text(const std::string& column) const {
    const size_t i = index_.at(column);
    if (i >= fields_.size()) {
      return RowError("row has " + std::to_string(fields_.size()) + " columns, '" + column +
                      "' is column " + std::to_string(i + 1));
    }
    return fields_[i];
  }
  // A number (an integer, or a decimal when `decimal`) in [min, max], times `scale`.
  StatusOr<int64_t> Number(const std::string& column, int64_t min, int64_t max,
                           double scale = 1) const {
    ASSIGN_OR_RETURN(std::string_view v, Text(column));
    double d = 0;
    auto r = std::from_chars(v.data(), v.data() + v.size(), d);
    if (v.empty() || r.ec != std::errc() || r.ptr != v.data() + v.size() || !std::isfinite(d)) {
      return RowError("'" + column + "' is not a number: '" + std::string(v) + "'");
    }
    const double scaled = std::round(d * scale);
    if (scaled < static_cast<double>(min) || scaled > static_cast<double>(max)) {
      return RowError("'" + column + "' = " + std::string(v) + " is outside [" +
                      std::to_string(min) + ", " + std::to_string(max) + "]" +
                      (scale != 1 ? " (after scaling by " + std::to_string(scale) + ")" : ""));
    }
    return static_cast<int64_t>(scaled);
  }

 private:
  const std::string name_;
  std::istringstream in_;
  std::string header_;
  std::unordered_map<std::string, size_t> index_;
  std::string row_;
  std::vector<std::string_view> fields_;
  size_t line_ = 1;  // the header's
};

constexpr int64_t kMaxMilli = int64_t{1} << 40;

StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound(path + ": cannot open");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

StatusOr<std::vector<TaskSpec>> ParseOpenbPods(Table& t) {
  std::vector<TaskSpec> tasks;
  while (t.Next()) {
    TaskSpec task;
    ASSIGN_OR_RETURN(std::string_view name, t.Text("name"));
    task.name = std::string(name);
    ASSIGN_OR_RETURN(task.cpu_milli, t.Number("cpu_milli", 0, kMaxMilli));
    ASSIGN_OR_RETURN(task.memory_mib, t.Number("memory_mib", 0, kMaxMilli));
    ASSIGN_OR_RETURN(int64_t num_gpu, t.Number("num_gpu", 0, kMaxGpusPerNode));
    ASSIGN_OR_RETURN(int64_t gpu_milli, t.Number("gpu_milli", 0, kGpuMilli));
    task.num_gpu = static_cast<int>(num_gpu);
    if (task.num_gpu > 0 && gpu_milli == 0) {
      return t.RowError("'gpu_milli' is 0 for a task that asks for " + std::to_string(num_gpu) +
                        " GPU(s)");
    }
    task.gpu_milli = task.num_gpu > 0 ? static_cast<int>(gpu_milli) : 0;
    if (t.Has("gpu_spec")) {
      ASSIGN_OR_RETURN(std::string_view spec, t.Text("gpu_spec"));
      while (!spec.empty()) {
        const size_t bar = spec.find('|');
        if (bar != 0) task.gpu_models.emplace_back(spec.substr(0, bar));
        if (bar == std::string_view::npos) break;
        spec.remove_prefix(bar + 1);
      }
    }
    tasks.push_back(std::move(task));
  }
  return tasks;
}

StatusOr<std::vector<TaskSpec>> ParseDlrm(Table& t) {
  std::vector<TaskSpec> tasks;
  while (t.Next()) {
    TaskSpec task;
    ASSIGN_OR_RETURN(std::string_view name, t.Text("instance_sn"));
    task.name = std::string(name);
    ASSIGN_OR_RETURN(std::string_view role, t.Text("role"));
    if (role != "CN" && role != "HN") {
      return t.RowError("'role' must be CN (CPU node) or HN (GPU node), got '" + std::string(role) +
                        "'");
    }
    ASSIGN_OR_RETURN(std::string_view app, t.Text("app_name"));
    task.group = std::string(app);
    ASSIGN_OR_RETURN(task.cpu_milli, t.Number("cpu_request", 0, kMaxMilli, 1000));
    ASSIGN_OR_RETURN(task.memory_mib, t.Number("memory_request", 0, kMaxMilli, 1024));
    ASSIGN_OR_RETURN(int64_t gpus, t.Number("gpu_request", 0, kMaxGpusPerNode));
    task.num_gpu = static_cast<int>(gpus);
    task.gpu_milli = gpus > 0 ? kGpuMilli : 0;
    ASSIGN_OR_RETURN(int64_t max_per_node, t.Number("max_instance_per_node", -1, 1 << 20));
    task.max_per_node = static_cast<int>(max_per_node);
    tasks.push_back(std::move(task));
  }
  return tasks;
}

}  // namespace

StatusOr<std::vector<NodeSpec>> ParseNodeList(const std::string& text, const std::string& name) {
  Table t(text, name);
  RETURN_IF_ERROR(t.Header({"sn", "cpu_milli", "memory_mib", "gpu", "model"}));
  std::vector<NodeSpec> nodes;
  while (t.Next()) {
    NodeSpec n;
    ASSIGN_OR_RETURN(std::string_view sn, t.Text("sn"));
    n.name = std::string(sn);
    ASSIGN_OR_RETURN(n.cpu_milli, t.Number("cpu_milli", 0, kMaxMilli));
    ASSIGN_OR_RETURN(n.memory_mib, t.Number("memory_mib", 0, kMaxMilli));
    ASSIGN_OR_RETURN(int64_t gpus, t.Number("gpu", 0, kMaxGpusPerNode));
    n.gpus = static_cast<int>(gpus);
    ASSIGN_OR_RETURN(std::string_view model, t.Text("model"));
    if (n.gpus > 0 && model.empty()) return t.RowError("a node with GPUs needs a 'model'");
    n.gpu_model = n.gpus > 0 ? std::string(model) : "";
    nodes.push_back(std::move(n));
  }
  if (nodes.empty()) return InvalidArgument(name + ": no nodes");
  return nodes;
}

StatusOr<std::vector<TaskSpec>> ParseTaskList(const std::string& text, const std::string& name) {
  Table t(text, name);
  const bool dlrm = text.rfind("instance_sn,", 0) == 0;
  if (dlrm) {
    RETURN_IF_ERROR(t.Header({"instance_sn", "role", "app_name", "cpu_request", "gpu_request",
                              "memory_request", "max_instance_per_node"}));
  } else {
    RETURN_IF_ERROR(t.Header({"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}));
  }
  StatusOr<std::vector<TaskSpec>> tasks = dlrm ? ParseDlrm(t) : ParseOpenbPods(t);
  if (tasks.ok() && tasks->empty()) return InvalidArgument(name + ": no tasks");
  return tasks;
}

StatusOr<std::vector<NodeSpec>> ReadNodeList(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseNodeList(text, path);
}

StatusOr<std::vector<TaskSpec>> ReadTaskList(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseTaskList(text, path);
}

}  // namespace dais::placement
