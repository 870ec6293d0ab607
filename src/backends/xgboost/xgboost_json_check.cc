#include "backends/xgboost/xgboost_json_check.h"

#include <rapidjson/document.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "common/json.h"

namespace dais::backends {
namespace {

using Json = rapidjson::Value;

constexpr int64_t kMaxNumFeature = int64_t{1} << 31;  // split indices have 31 bits
constexpr int64_t kMaxOutputGroups = int64_t{1} << 16;
constexpr int64_t kMaxNodes = std::numeric_limits<int32_t>::max();  // bst_node_t
constexpr int64_t kMaxCategory = int64_t{1} << 24;  // exclusive; XGBoost's limit when training
constexpr int64_t kMaxCategoryBytes = int64_t{1} << 30;
constexpr int64_t kRootParent = std::numeric_limits<int32_t>::max();  // what XGBoost writes

std::string Join(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
}

std::string Index(std::string_view name, int64_t i) {
  return std::string(name) + "[" + std::to_string(i) + "]";
}

// "1 entry", "3 entries".
std::string Count(int64_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

std::string_view Kind(const Json& v) {
  if (v.IsObject()) return "an object";
  if (v.IsArray()) return "an array";
  if (v.IsString()) return "a string";
  if (v.IsBool()) return "a boolean";
  if (v.IsNull()) return "null";
  return "a number";
}

// Text from the file as a message shows it: cut at 40 bytes, anything but printable ASCII
// escaped (messages reach logs and JSON error bodies).
std::string Printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 40)) {
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return s.size() > 40 ? out + "..." : out;
}

std::string Quote(std::string_view s) { return "\"" + Printable(s) + "\""; }

// A scalar as a message shows it.
std::string Show(const Json& v) {
  if (v.IsString()) return Quote(std::string_view(v.GetString(), v.GetStringLength()));
  if (v.IsInt64()) return std::to_string(v.GetInt64());
  if (v.IsUint64()) return std::to_string(v.GetUint64());
  if (v.IsNumber()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", v.GetDouble());
    return buf;
  }
  if (v.IsBool()) return v.GetBool() ? "true" : "false";
  return std::string(Kind(v));
}

// "<name> = <value> is not <wanted>", or "<name> is an array, not <wanted>" for non-scalars.
Status NotA(std::string_view name, const Json& v, std::string_view wanted) {
  if (v.IsObject() || v.IsArray() || v.IsNull()) {
    return InvalidArgument(std::string(name) + " is " + std::string(Kind(v)) + ", not " +
                           std::string(wanted));
  }
  return InvalidArgument(std::string(name) + " = " + Show(v) + " is not " + std::string(wanted));
}

Status OutOfRange(std::string_view name, int64_t value, std::string_view range) {
  return InvalidArgument(std::string(name) + " = " + std::to_string(value) + " is out of range " +
                         std::string(range));
}

StatusOr<const Json*> Field(const Json& object, std::string_view path, const char* key) {
  auto it = object.FindMember(key);
  if (it == object.MemberEnd()) return InvalidArgument(Join(path, key) + " is missing");
  return &it->value;
}

StatusOr<const Json*> ObjectField(const Json& object, std::string_view path, const char* key) {
  ASSIGN_OR_RETURN(const Json* v, Field(object, path, key));
  if (!v->IsObject()) return NotA(Join(path, key), *v, "an object");
  return v;
}

StatusOr<const Json*> ArrayField(const Json& object, std::string_view path, const char* key) {
  ASSIGN_OR_RETURN(const Json* v, Field(object, path, key));
  if (!v->IsArray()) return NotA(Join(path, key), *v, "an array");
  return v;
}

StatusOr<std::string_view> StringField(const Json& object, std::string_view path, const char* key) {
  ASSIGN_OR_RETURN(const Json* v, Field(object, path, key));
  if (!v->IsString()) return NotA(Join(path, key), *v, "a string");
  return std::string_view(v->GetString(), v->GetStringLength());
}

// XGBoost writes its parameters as strings: "num_feature": "4".
StatusOr<int64_t> IntParam(const Json& object, std::string_view path, const char* key, int64_t lo,
                           int64_t hi) {
  ASSIGN_OR_RETURN(const Json* v, Field(object, path, key));
  const std::string name = Join(path, key);
  if (!v->IsString()) return NotA(name, *v, "a string holding an integer");
  const char* begin = v->GetString();
  const char* end = begin + v->GetStringLength();
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || begin == end) return NotA(name, *v, "an integer");
  if (value < lo || value > hi) {
    return InvalidArgument(name + " = " + Show(*v) + " is out of range [" + std::to_string(lo) +
                           ", " + std::to_string(hi) + "]");
  }
  return value;
}

// Whether `d` stays finite as the float XGBoost stores: below FLT_MAX plus half an ulp, where
// rounding to nearest turns to infinity.
bool FiniteFloat(double d) {
  static const double kFloatOverflow = std::ldexp(1.0, 128) - std::ldexp(1.0, 103);
  return std::fabs(d) < kFloatOverflow;  // false for NaN too
}

Status FloatParam(const Json& object, std::string_view path, const char* key) {
  ASSIGN_OR_RETURN(const Json* v, Field(object, path, key));
  const std::string name = Join(path, key);
  if (!v->IsString()) return NotA(name, *v, "a string holding a number");
  const char* begin = v->GetString();
  const char* end = begin + v->GetStringLength();
  double value = 0;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || begin == end || !FiniteFloat(value)) {
    return NotA(name, *v, "a finite number");
  }
  return OkStatus();
}

// The entries of an array of integers (any length).
Status ReadInts(const Json& array, std::string_view name, std::vector<int64_t>* out) {
  out->clear();
  out->reserve(array.Size());
  for (rapidjson::SizeType i = 0; i < array.Size(); ++i) {
    if (!array[i].IsInt64()) return NotA(Index(name, i), array[i], "an integer");
    out->push_back(array[i].GetInt64());
  }
  return OkStatus();
}

// An array field of exactly `n` entries; `count` names where n came from.
StatusOr<const Json*> SizedArray(const Json& object, const char* key, int64_t n,
                                 std::string_view count) {
  ASSIGN_OR_RETURN(const Json* v, ArrayField(object, "", key));
  if (static_cast<int64_t>(v->Size()) != n) {
    return InvalidArgument(std::string(key) + " has " + Count(v->Size(), "entry", "entries") +
                           " but " + std::string(count) + " is " + std::to_string(n));
  }
  return v;
}

// Every entry a number; finite as a float where `finite(i)` says so.
template <typename Pred>
Status CheckNumbers(const Json& array, std::string_view name, Pred finite) {
  for (rapidjson::SizeType i = 0; i < array.Size(); ++i) {
    const Json& v = array[i];
    if (!v.IsNumber()) return NotA(Index(name, i), v, "a number");
    if (finite(i) && !FiniteFloat(v.GetDouble())) return NotA(Index(name, i), v, "a finite float");
  }
  return OkStatus();
}

// XGBoost's JSON reader keeps the last of two equal keys, rapidjson's FindMember finds the first:
// a second "left_children" would be the one libxgboost loads, unchecked. (XGBoost 1.7 does not
// decode \u escapes, so a key it reads as "left_children" is spelled so, and rapidjson reads it
// the same.) Walks every object with an explicit stack.
Status CheckUniqueKeys(const Json& root) {
  std::vector<std::pair<const Json*, std::string>> stack = {{&root, ""}};
  std::vector<std::string_view> keys;
  while (!stack.empty()) {
    auto [v, path] = std::move(stack.back());
    stack.pop_back();
    if (v->IsArray()) {
      for (rapidjson::SizeType i = 0; i < v->Size(); ++i) {
        const Json& e = (*v)[i];
        if (e.IsObject() || e.IsArray()) stack.emplace_back(&e, Index(path, i));
      }
      continue;
    }
    keys.clear();
    for (const auto& m : v->GetObject()) {
      keys.emplace_back(m.name.GetString(), m.name.GetStringLength());
      if (m.value.IsObject() || m.value.IsArray())
        stack.emplace_back(&m.value, Join(path, Printable(keys.back())));
    }
    std::sort(keys.begin(), keys.end());
    auto dup = std::adjacent_find(keys.begin(), keys.end());
    if (dup != keys.end()) {
      return InvalidArgument((path.empty() ? "the top-level object" : path) + " has the key " +
                             Quote(*dup) + " twice (XGBoost would load the last one)");
    }
  }
  return OkStatus();
}

struct ModelShape {
  int64_t num_feature = 0;
  int64_t num_groups = 1;  // max(1, num_class, num_target)
};

// One tree's integer per-node arrays. split_type is empty when the tree has none.
struct TreeNodes {
  int64_t n = 0;
  std::vector<int64_t> left, right, parents, split_index, split_type;
};

constexpr char kNumNodes[] = "tree_param.num_nodes";

Status ReadNodeInts(const Json& tree, const char* key, int64_t n, std::vector<int64_t>* out) {
  ASSIGN_OR_RETURN(const Json* array, SizedArray(tree, key, n, kNumNodes));
  return ReadInts(*array, key, out);
}

Status ReadTreeNodes(const Json& tree, TreeNodes* t) {
  ASSIGN_OR_RETURN(const Json* param, ObjectField(tree, "", "tree_param"));
  ASSIGN_OR_RETURN(t->n, IntParam(*param, "tree_param", "num_nodes", 1, kMaxNodes));
  RETURN_IF_ERROR(ReadNodeInts(tree, "left_children", t->n, &t->left));
  RETURN_IF_ERROR(ReadNodeInts(tree, "right_children", t->n, &t->right));
  RETURN_IF_ERROR(ReadNodeInts(tree, "parents", t->n, &t->parents));
  RETURN_IF_ERROR(ReadNodeInts(tree, "split_indices", t->n, &t->split_index));
  t->split_type.clear();
  if (tree.HasMember("split_type")) {
    RETURN_IF_ERROR(ReadNodeInts(tree, "split_type", t->n, &t->split_type));
    for (int64_t i = 0; i < t->n; ++i) {
      if (t->split_type[i] != 0 && t->split_type[i] != 1) {
        return InvalidArgument(Index("split_type", i) + " = " + std::to_string(t->split_type[i]) +
                               " is neither 0 (numerical) nor 1 (categorical)");
      }
    }
  }
  ASSIGN_OR_RETURN(const Json* dflt, SizedArray(tree, "default_left", t->n, kNumNodes));
  for (rapidjson::SizeType i = 0; i < dflt->Size(); ++i) {
    const Json& v = (*dflt)[i];
    if (!v.IsBool() && !(v.IsInt64() && (v.GetInt64() == 0 || v.GetInt64() == 1))) {
      return NotA(Index("default_left", i), v, "0, 1, true or false");
    }
  }
  return OkStatus();
}

// split_conditions, base_weights, loss_changes, sum_hessian.
Status CheckNodeFloats(const Json& tree, const TreeNodes& t) {
  const auto any = [](rapidjson::SizeType) { return false; };
  const auto all = [](rapidjson::SizeType) { return true; };
  const auto numerical = [&t](rapidjson::SizeType i) {
    return t.split_type.empty() || t.split_type[i] == 0;  // categorical thresholds are NaN
  };
  ASSIGN_OR_RETURN(const Json* conds, SizedArray(tree, "split_conditions", t.n, kNumNodes));
  RETURN_IF_ERROR(CheckNumbers(*conds, "split_conditions", numerical));
  ASSIGN_OR_RETURN(const Json* param, ObjectField(tree, "", "tree_param"));
  int64_t leaf_size = 0;
  if (param->HasMember("size_leaf_vector")) {
    ASSIGN_OR_RETURN(leaf_size, IntParam(*param, "tree_param", "size_leaf_vector", 0, kMaxNodes));
  }
  const bool vector_leaves = leaf_size > 1;  // t.n * leaf_size < 2^62
  ASSIGN_OR_RETURN(
      const Json* weights,
      SizedArray(tree, "base_weights", vector_leaves ? t.n * leaf_size : t.n,
                 vector_leaves ? "tree_param.num_nodes * size_leaf_vector" : kNumNodes));
  RETURN_IF_ERROR(CheckNumbers(*weights, "base_weights", all));
  for (const char* key : {"loss_changes", "sum_hessian"}) {
    ASSIGN_OR_RETURN(const Json* stats, SizedArray(tree, key, t.n, kNumNodes));
    RETURN_IF_ERROR(CheckNumbers(*stats, key, any));
  }
  return OkStatus();
}

// Per node, reachable or not: child and parent indices in range, leaves with two -1 children.
Status CheckLinks(const TreeNodes& t) {
  const std::string range = "(the tree has " + Count(t.n, "node", "nodes") + ")";
  for (int64_t i = 0; i < t.n; ++i) {
    if (t.left[i] < -1 || t.left[i] >= t.n) {
      return OutOfRange(Index("left_children", i), t.left[i], range);
    }
    if (t.right[i] < -1 || t.right[i] >= t.n) {
      return OutOfRange(Index("right_children", i), t.right[i], range);
    }
    if ((t.left[i] == -1) != (t.right[i] == -1)) {
      return InvalidArgument("node " + std::to_string(i) + " has one child (left_children[" +
                             std::to_string(i) + "] = " + std::to_string(t.left[i]) +
                             ", right_children[" + std::to_string(i) +
                             "] = " + std::to_string(t.right[i]) + "): a leaf has -1 in both");
    }
    if (i == 0 && t.parents[0] != kRootParent && t.parents[0] != -1) {
      return InvalidArgument("parents[0] = " + std::to_string(t.parents[0]) +
                             " but the root has no parent (2147483647 or -1)");
    }
    if (i > 0 && (t.parents[i] < 0 || t.parents[i] >= t.n)) {
      return OutOfRange(Index("parents", i), t.parents[i], range);
    }
  }
  return OkStatus();
}

// From the root, with an explicit stack: every node reached at most once and every split's feature
// exists. Relies on CheckLinks (indices in range). Sets (*from)[i] to the node that reached node
// i: -1 for the root, -2 for a node not reached.
Status WalkFromRoot(const TreeNodes& t, int64_t num_feature, std::vector<int64_t>* from) {
  from->assign(t.n, -2);
  (*from)[0] = -1;
  std::vector<int64_t> stack = {0};
  while (!stack.empty()) {
    const int64_t node = stack.back();
    stack.pop_back();
    if (t.left[node] == -1) continue;  // a leaf
    if (t.split_index[node] < 0 || t.split_index[node] >= num_feature) {
      return OutOfRange(Index("split_indices", node), t.split_index[node],
                        "(the model has " + Count(num_feature, "feature", "features") + ")");
    }
    for (const auto& [name, child] :
         {std::pair{"left_children", t.left[node]}, std::pair{"right_children", t.right[node]}}) {
      if ((*from)[child] != -2) {
        return InvalidArgument("node " + std::to_string(child) + " is reached twice (" +
                               Index(name, node) + " = " + std::to_string(child) +
                               "): the tree is not a tree (cycle or shared child)");
      }
      (*from)[child] = node;
      stack.push_back(child);
    }
  }
  return OkStatus();
}

// parents[i] names the node that reached node i, for every node reached from the root.
Status CheckParents(const TreeNodes& t, const std::vector<int64_t>& from) {
  for (int64_t i = 1; i < t.n; ++i) {
    if (from[i] >= 0 && t.parents[i] != from[i]) {
      return InvalidArgument(Index("parents", i) + " = " + std::to_string(t.parents[i]) +
                             " but node " + std::to_string(i) + " is a child of node " +
                             std::to_string(from[i]));
    }
  }
  return OkStatus();
}

struct Categories {
  std::vector<int64_t> nodes, segments, sizes, values;
};

Status ReadCategories(const Json& tree, Categories* c) {
  const std::pair<const char*, std::vector<int64_t>*> fields[] = {
      {"categories_nodes", &c->nodes},
      {"categories_segments", &c->segments},
      {"categories_sizes", &c->sizes},
      {"categories", &c->values}};
  for (const auto& [key, out] : fields) {
    ASSIGN_OR_RETURN(const Json* array, ArrayField(tree, "", key));
    RETURN_IF_ERROR(ReadInts(*array, key, out));
  }
  for (const auto& [key, out] : {fields[1], fields[2]}) {
    if (out->size() != c->nodes.size()) {
      return InvalidArgument(std::string(key) + " has " + Count(out->size(), "entry", "entries") +
                             " but categories_nodes has " + std::to_string(c->nodes.size()));
    }
  }
  for (size_t j = 0; j < c->values.size(); ++j) {
    if (c->values[j] < 0 || c->values[j] >= kMaxCategory) {
      return OutOfRange(Index("categories", j), c->values[j], "[0, 16777216)");
    }
  }
  return OkStatus();
}

// categories_nodes lists exactly the nodes whose split_type is 1, in increasing order.
Status CheckCategoryNodes(const TreeNodes& t, const Categories& c) {
  for (size_t k = 0; k < c.nodes.size(); ++k) {
    const int64_t node = c.nodes[k];
    const std::string name = Index("categories_nodes", k);
    if (node < 0 || node >= t.n) {
      return OutOfRange(name, node, "(the tree has " + Count(t.n, "node", "nodes") + ")");
    }
    if (k > 0 && node <= c.nodes[k - 1]) {
      return InvalidArgument(name + " = " + std::to_string(node) + " does not come after " +
                             Index("categories_nodes", k - 1) + " = " +
                             std::to_string(c.nodes[k - 1]));
    }
    if (t.split_type[node] != 1) {
      return InvalidArgument(name + " = " + std::to_string(node) + " but split_type[" +
                             std::to_string(node) + "] = 0 (numerical)");
    }
  }
  size_t k = 0;
  for (int64_t i = 0; i < t.n; ++i) {
    if (t.split_type[i] != 1) continue;
    if (k >= c.nodes.size() || c.nodes[k] != i) {
      return InvalidArgument(Index("split_type", i) + " = 1 but node " + std::to_string(i) +
                             " is not in categories_nodes");
    }
    ++k;
  }
  return OkStatus();
}

// Each node's segment lies within categories and is not empty; adds the bit fields' bytes.
Status CheckCategorySegments(const Categories& c, int64_t* bytes) {
  const int64_t total = static_cast<int64_t>(c.values.size());
  for (size_t k = 0; k < c.nodes.size(); ++k) {
    const int64_t begin = c.segments[k];
    const int64_t size = c.sizes[k];
    if (begin < 0 || begin > total || size < 1 || size > total - begin) {
      return InvalidArgument(Index("categories_segments", k) + " = " + std::to_string(begin) +
                             ", " + Index("categories_sizes", k) + " = " + std::to_string(size) +
                             ": not a non-empty segment of categories (" +
                             Count(total, "entry", "entries") + ")");
    }
    const int64_t largest =
        *std::max_element(c.values.begin() + begin, c.values.begin() + begin + size);
    *bytes += (largest / 32 + 1) * 4;  // XGBoost's bit field: largest + 1 bits in 32-bit words
    if (*bytes > kMaxCategoryBytes) {
      return InvalidArgument("the category bit fields XGBoost would build exceed 1 GiB (at " +
                             Index("categories_nodes", k) + " = " + std::to_string(c.nodes[k]) +
                             ", largest category " + std::to_string(largest) + ")");
    }
  }
  return OkStatus();
}

Status CheckTree(const Json& tree, int64_t index, const ModelShape& shape,
                 int64_t* category_bytes) {
  ASSIGN_OR_RETURN(const Json* id, Field(tree, "", "id"));
  if (!id->IsInt64() || id->GetInt64() != index) {
    return NotA("id", *id, "the tree's index " + std::to_string(index));
  }
  TreeNodes t;
  RETURN_IF_ERROR(ReadTreeNodes(tree, &t));
  RETURN_IF_ERROR(CheckNodeFloats(tree, t));
  RETURN_IF_ERROR(CheckLinks(t));
  std::vector<int64_t> from;
  RETURN_IF_ERROR(WalkFromRoot(t, shape.num_feature, &from));
  RETURN_IF_ERROR(CheckParents(t, from));
  if (t.split_type.empty()) return OkStatus();  // XGBoost then reads no categories
  Categories c;
  RETURN_IF_ERROR(ReadCategories(tree, &c));
  RETURN_IF_ERROR(CheckCategoryNodes(t, c));
  return CheckCategorySegments(c, category_bytes);
}

// `gbtree` is the booster object holding "model" (gradient_booster, or its "gbtree" for dart).
StatusOr<int64_t> CheckGbtree(const Json& gbtree, const std::string& path,
                              const ModelShape& shape) {
  ASSIGN_OR_RETURN(const Json* model, ObjectField(gbtree, path, "model"));
  const std::string mpath = Join(path, "model");
  ASSIGN_OR_RETURN(const Json* param, ObjectField(*model, mpath, "gbtree_model_param"));
  const std::string ppath = Join(mpath, "gbtree_model_param");
  ASSIGN_OR_RETURN(int64_t declared, IntParam(*param, ppath, "num_trees", 0, kMaxNodes));
  if (param->HasMember("num_parallel_tree")) {
    RETURN_IF_ERROR(IntParam(*param, ppath, "num_parallel_tree", 1, kMaxNodes).status());
  }
  ASSIGN_OR_RETURN(const Json* trees, ArrayField(*model, mpath, "trees"));
  ASSIGN_OR_RETURN(const Json* info, ArrayField(*model, mpath, "tree_info"));
  const int64_t n = trees->Size();
  if (declared != n || static_cast<int64_t>(info->Size()) != n) {
    return InvalidArgument(Join(ppath, "num_trees") + " = " + std::to_string(declared) + ", " +
                           Join(mpath, "trees") + " has " + Count(n, "entry", "entries") + ", " +
                           Join(mpath, "tree_info") + " has " + std::to_string(info->Size()) +
                           ": they must agree");
  }
  for (int64_t i = 0; i < n; ++i) {
    const Json& group = (*info)[i];
    if (!group.IsInt64()) return NotA(Index(Join(mpath, "tree_info"), i), group, "an integer");
    if (group.GetInt64() < 0 || group.GetInt64() >= shape.num_groups) {
      return OutOfRange(
          Index(Join(mpath, "tree_info"), i), group.GetInt64(),
          "(the model has " + Count(shape.num_groups, "output group", "output groups") + ")");
    }
  }
  int64_t category_bytes = 0;
  for (int64_t i = 0; i < n; ++i) {
    const Json& tree = (*trees)[i];
    if (!tree.IsObject()) return NotA("tree " + std::to_string(i), tree, "an object");
    Status s = CheckTree(tree, i, shape, &category_bytes);
    if (!s.ok()) return s.WithPrefix("tree " + std::to_string(i));
  }
  return n;
}

Status CheckDart(const Json& booster, const std::string& path, const ModelShape& shape) {
  ASSIGN_OR_RETURN(const Json* gbtree, ObjectField(booster, path, "gbtree"));
  ASSIGN_OR_RETURN(int64_t num_trees, CheckGbtree(*gbtree, Join(path, "gbtree"), shape));
  ASSIGN_OR_RETURN(const Json* drop, ArrayField(booster, path, "weight_drop"));
  const std::string name = Join(path, "weight_drop");
  if (static_cast<int64_t>(drop->Size()) != num_trees) {
    return InvalidArgument(name + " has " + Count(drop->Size(), "entry", "entries") +
                           " but the model has " + Count(num_trees, "tree", "trees"));
  }
  return CheckNumbers(*drop, name, [](rapidjson::SizeType) { return true; });
}

Status CheckGblinear(const Json& booster, const std::string& path, const ModelShape& shape) {
  ASSIGN_OR_RETURN(const Json* model, ObjectField(booster, path, "model"));
  const std::string mpath = Join(path, "model");
  ASSIGN_OR_RETURN(const Json* weights, ArrayField(*model, mpath, "weights"));
  const int64_t expected = (shape.num_feature + 1) * shape.num_groups;  // < 2^48
  if (static_cast<int64_t>(weights->Size()) != expected) {
    return InvalidArgument(
        Join(mpath, "weights") + " has " + Count(weights->Size(), "entry", "entries") +
        " but (num_feature + 1) * output groups = (" + std::to_string(shape.num_feature) +
        " + 1) * " + std::to_string(shape.num_groups) + " = " + std::to_string(expected));
  }
  return CheckNumbers(*weights, Join(mpath, "weights"), [](rapidjson::SizeType) { return true; });
}

StatusOr<ModelShape> CheckModelParam(const Json& learner) {
  ASSIGN_OR_RETURN(const Json* param, ObjectField(learner, "learner", "learner_model_param"));
  const std::string path = "learner.learner_model_param";
  ModelShape shape;
  ASSIGN_OR_RETURN(shape.num_feature, IntParam(*param, path, "num_feature", 1, kMaxNumFeature));
  ASSIGN_OR_RETURN(int64_t num_class, IntParam(*param, path, "num_class", 0, kMaxOutputGroups));
  int64_t num_target = 1;
  if (param->HasMember("num_target")) {
    ASSIGN_OR_RETURN(num_target, IntParam(*param, path, "num_target", 1, kMaxOutputGroups));
  }
  RETURN_IF_ERROR(FloatParam(*param, path, "base_score"));
  shape.num_groups = std::max({int64_t{1}, num_class, num_target});
  return shape;
}

Status CheckBooster(const Json& learner, const ModelShape& shape) {
  const std::string path = "learner.gradient_booster";
  ASSIGN_OR_RETURN(const Json* booster, ObjectField(learner, "learner", "gradient_booster"));
  ASSIGN_OR_RETURN(std::string_view name, StringField(*booster, path, "name"));
  if (name == "gbtree") return CheckGbtree(*booster, path, shape).status();
  if (name == "dart") return CheckDart(*booster, path, shape);
  if (name == "gblinear") return CheckGblinear(*booster, path, shape);
  return NotA(Join(path, "name"), (*booster)["name"], "gbtree, dart or gblinear");
}

}  // namespace

Status CheckXgboostModelJson(std::string_view json) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(json::ParseJson<rapidjson::kParseNanAndInfFlag>(json, &doc));
  if (!doc.IsObject()) return NotA("the model", doc, "a JSON object");
  RETURN_IF_ERROR(CheckUniqueKeys(doc));
  ASSIGN_OR_RETURN(const Json* learner, ObjectField(doc, "", "learner"));
  ASSIGN_OR_RETURN(ModelShape shape, CheckModelParam(*learner));
  ASSIGN_OR_RETURN(const Json* objective, ObjectField(*learner, "learner", "objective"));
  RETURN_IF_ERROR(StringField(*objective, "learner.objective", "name").status());
  return CheckBooster(*learner, shape);
}

}  // namespace dais::backends
