#include "backends/xgboost/xgboost_json_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>

#include "common/status_testing.h"

namespace dais::backends {
namespace {

using ::testing::HasSubstr;

// Trained by XGBoost 1.7.4 (Debian 12) and saved with Booster.save_model("xgboost.json"):
//   rng = np.random.default_rng(3); x = rng.normal(size=(300, 4)).astype(np.float32)
//   y = ((x[:, 0] + 0.7 * x[:, 1] * x[:, 2] + 0.3 * rng.normal(size=300)) > 0).astype(int)
//   xgb.train({"max_depth": 2, "objective": "binary:logistic", "eta": 0.5, "seed": 1},
//             xgb.DMatrix(x, label=y), 3)
// Three trees of 7 nodes (root 0, inner nodes 1 and 2, leaves 3-6), 4 features; only the line
// breaks are ours.
constexpr char kModel[] = R"json(
{"learner":{"attributes":{"best_iteration":"2","best_ntree_limit":"3"},"feature_names":[],
"feature_types":[],"gradient_booster":{"model":{"gbtree_model_param":{"num_parallel_tree":"1",
"num_trees":"3","size_leaf_vector":"0"},"tree_info":[0,0,0],
"trees":[{"base_weights":[-1.3157895E-2,-1.2894737E0,1.2307693E0,-1.8285714E0,-7.906977E-1,
2.7272728E-1,1.5517242E0],"categories":[],"categories_nodes":[],"categories_segments":[],
"categories_sizes":[],"default_left":[1,1,1,0,0,0,0],"id":0,"left_children":[1,3,5,-1,-1,-1,-1],
"loss_changes":[1.2224798E2,8.7719345E0,1.1568844E1,0E0,0E0,0E0,0E0],"parents":[2147483647,0,0,
1,1,2,2],"right_children":[2,4,6,-1,-1,-1,-1],"split_conditions":[3.1312548E-2,-7.4992514E-1,
3.2522607E-1,-9.142857E-1,-3.9534885E-1,1.3636364E-1,7.758621E-1],"split_indices":[0,0,0,0,0,0,
0],"split_type":[0,0,0,0,0,0,0],"sum_hessian":[7.5E1,3.7E1,3.8E1,1.65E1,2.05E1,1E1,2.8E1],
"tree_param":{"num_deleted":"0","num_feature":"4","num_nodes":"7","size_leaf_vector":"0"}},
{"base_weights":[-1.37742385E-2,-8.143327E-1,7.1370566E-1,-1.290003E0,-4.945964E-1,3.3367315E-1,
1.2300874E0],"categories":[],"categories_nodes":[],"categories_segments":[],
"categories_sizes":[],"default_left":[1,1,1,0,0,0,0],"id":1,"left_children":[1,3,5,-1,-1,-1,-1],
"loss_changes":[4.037568E1,4.3805923E0,6.719345E0,0E0,0E0,0E0,0E0],"parents":[2147483647,0,0,1,
1,2,2],"right_children":[2,4,6,-1,-1,-1,-1],"split_conditions":[-5.4451637E-3,-8.6602026E-1,
7.548077E-1,-6.450015E-1,-2.472982E-1,1.6683657E-1,6.150437E-1],"split_indices":[0,0,0,0,0,0,0],
"split_type":[0,0,0,0,0,0,0],"sum_hessian":[6.732958E1,3.1997929E1,3.5331654E1,1.1642644E1,
2.0355286E1,2.1301172E1,1.4030479E1],"tree_param":{"num_deleted":"0","num_feature":"4",
"num_nodes":"7","size_leaf_vector":"0"}},{"base_weights":[-1.1559188E-2,-4.333843E-1,
7.0240116E-1,-6.441665E-1,2.2846127E-1,8.095582E-1,-6.9612134E-1],"categories":[],
"categories_nodes":[],"categories_segments":[],"categories_sizes":[],"default_left":[1,1,1,0,0,
0,0],"id":2,"left_children":[1,3,5,-1,-1,-1,-1],"loss_changes":[1.8094263E1,5.413495E0,
3.9084349E0,0E0,0E0,0E0,0E0],"parents":[2147483647,0,0,1,1,2,2],"right_children":[2,4,6,-1,-1,
-1,-1],"split_conditions":[2.7403414E-1,9.159727E-1,1.6250191E0,-3.2208326E-1,1.1423063E-1,
4.047791E-1,-3.4806067E-1],"split_indices":[0,1,2,0,0,0,0],"split_type":[0,0,0,0,0,0,0],
"sum_hessian":[5.806985E1,3.6750027E1,2.1319822E1,2.789336E1,8.856666E0,2.0193684E1,1.12614E0],
"tree_param":{"num_deleted":"0","num_feature":"4","num_nodes":"7","size_leaf_vector":"0"}}]},
"name":"gbtree"},"learner_model_param":{"base_score":"5E-1","boost_from_average":"1",
"num_class":"0","num_feature":"4","num_target":"1"},"objective":{"name":"binary:logistic",
"reg_loss_param":{"scale_pos_weight":"1"}}},"version":[1,7,4]}
)json";

// A gblinear model of the same data (reg:squarederror, 2 rounds): (4 + 1) * 1 weights.
constexpr char kLinearModel[] = R"json(
{"learner":{"attributes":{"best_iteration":"1","best_ntree_limit":"0"},"feature_names":[],
"feature_types":[],"gradient_booster":{"model":{"boosted_rounds":2,"weights":[2.4158171E-1,
2.3230854E-2,-3.7868496E-3,4.790837E-3,-3.5321563E-3]},"name":"gblinear"},
"learner_model_param":{"base_score":"5E-1","boost_from_average":"1","num_class":"0",
"num_feature":"4","num_target":"1"},"objective":{"name":"reg:squarederror",
"reg_loss_param":{"scale_pos_weight":"1"}}},"version":[1,7,4]}
)json";

using Writer = rapidjson::Writer<rapidjson::StringBuffer, rapidjson::UTF8<>, rapidjson::UTF8<>,
                                 rapidjson::CrtAllocator, rapidjson::kWriteNanAndInfFlag>;

std::string Serialize(const rapidjson::Value& value) {
  rapidjson::StringBuffer buffer;
  Writer writer(buffer);
  value.Accept(writer);
  return std::string(buffer.GetString(), buffer.GetSize());
}

// Each test parses a sound model, breaks one thing with rapidjson and checks the serialized result.
class XgboostJsonCheckTest : public ::testing::Test {
 protected:
  void SetUp() override { Load(kModel); }

  void Load(const char* json) {
    doc_.Parse<rapidjson::kParseNanAndInfFlag>(json);
    ASSERT_FALSE(doc_.HasParseError());
  }

  Status Check() const { return CheckXgboostModelJson(Serialize(doc_)); }

  // The message of a check that must fail with InvalidArgument.
  std::string Error() const {
    Status s = Check();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    return s.message();
  }

  rapidjson::Value& Learner() { return doc_["learner"]; }
  rapidjson::Value& Booster() { return Learner()["gradient_booster"]; }
  rapidjson::Value& Tree(int i) { return Booster()["model"]["trees"][i]; }
  rapidjson::Value& Node(int tree, const char* field, int node) { return Tree(tree)[field][node]; }
  void SetString(rapidjson::Value& v, const char* s) { v.SetString(s, doc_.GetAllocator()); }
  void SetInts(rapidjson::Value& v, std::initializer_list<int64_t> values) {
    v.SetArray();
    for (int64_t x : values) v.PushBack(rapidjson::Value(x), doc_.GetAllocator());
  }

  // Turns tree 0's root into a categorical split on feature 2 (categories 0, 2 and 5 go right),
  // laid out as XGBoost 1.7 writes one (NaN threshold, categories listed per categorical node).
  void MakeCategorical() {
    rapidjson::Value& tree = Tree(0);
    tree["split_type"][0].SetInt(1);
    tree["split_indices"][0].SetInt(2);
    tree["split_conditions"][0].SetDouble(std::numeric_limits<double>::quiet_NaN());
    SetInts(tree["categories"], {0, 2, 5});
    SetInts(tree["categories_nodes"], {0});
    SetInts(tree["categories_segments"], {0});
    SetInts(tree["categories_sizes"], {3});
  }

  // Rewrites the gbtree booster as XGBoost writes a dart one: the gbtree under "gbtree" and one
  // weight_drop per tree.
  void MakeDart() {
    auto& a = doc_.GetAllocator();
    rapidjson::Value gbtree(Booster(), a);
    rapidjson::Value drop(rapidjson::kArrayType);
    for (int i = 0; i < 3; ++i) drop.PushBack(1.0, a);
    rapidjson::Value dart(rapidjson::kObjectType);
    dart.AddMember("gbtree", gbtree, a);
    dart.AddMember("name", "dart", a);
    dart.AddMember("weight_drop", drop, a);
    Booster() = dart;
  }

  rapidjson::Document doc_;
};

TEST_F(XgboostJsonCheckTest, SoundModelsPass) {
  EXPECT_OK(Check());
  MakeCategorical();
  EXPECT_OK(Check());
  MakeDart();
  EXPECT_OK(Check());
  Load(kLinearModel);
  EXPECT_OK(Check());
}

TEST_F(XgboostJsonCheckTest, RootParentMayBeMinusOne) {
  Node(0, "parents", 0).SetInt(-1);  // loads like XGBoost's own 2147483647
  EXPECT_OK(Check());
  Node(0, "parents", 0).SetInt(3);
  EXPECT_THAT(Error(), HasSubstr("tree 0: parents[0] = 3 but the root has no parent"));
}

TEST_F(XgboostJsonCheckTest, MultiClassModelPasses) {
  SetString(Learner()["learner_model_param"]["num_class"], "3");
  SetInts(Booster()["model"]["tree_info"], {0, 1, 2});
  EXPECT_OK(Check());
}

// libxgboost 1.7 segfaults loading this one.
TEST_F(XgboostJsonCheckTest, RootChildOutOfRange) {
  Node(1, "left_children", 0).SetInt(1000000000);
  EXPECT_THAT(Error(), HasSubstr("tree 1: left_children[0] = 1000000000 is out of range (the "
                                 "tree has 7 nodes)"));
}

TEST_F(XgboostJsonCheckTest, DeepChildOutOfRange) {
  Node(2, "right_children", 2).SetInt(7);
  EXPECT_THAT(Error(), HasSubstr("tree 2: right_children[2] = 7 is out of range"));
  Node(2, "right_children", 2).SetInt(-2);
  EXPECT_THAT(Error(), HasSubstr("tree 2: right_children[2] = -2 is out of range"));
}

// libxgboost 1.7 spins forever loading the first three.
TEST_F(XgboostJsonCheckTest, CycleThroughTheRoot) {
  Node(0, "left_children", 0).SetInt(0);
  EXPECT_THAT(Error(), HasSubstr("tree 0: node 0 is reached twice (left_children[0] = 0): the "
                                 "tree is not a tree (cycle or shared child)"));
}

TEST_F(XgboostJsonCheckTest, DeepCycleToAnAncestor) {
  Node(0, "right_children", 1).SetInt(0);
  EXPECT_THAT(Error(), HasSubstr("tree 0: node 0 is reached twice (right_children[1] = 0)"));
}

TEST_F(XgboostJsonCheckTest, SelfLoop) {
  Node(1, "left_children", 2).SetInt(2);
  EXPECT_THAT(Error(), HasSubstr("tree 1: node 2 is reached twice (left_children[2] = 2)"));
}

TEST_F(XgboostJsonCheckTest, SharedChild) {
  Node(0, "left_children", 2).SetInt(3);  // node 3 is also node 1's left child
  EXPECT_THAT(Error(), HasSubstr("tree 0: node 3 is reached twice"));
  EXPECT_THAT(Error(), HasSubstr("(cycle or shared child)"));
}

TEST_F(XgboostJsonCheckTest, LeafWithOneChild) {
  Node(0, "right_children", 3).SetInt(4);
  EXPECT_THAT(Error(), HasSubstr("tree 0: node 3 has one child (left_children[3] = -1, "
                                 "right_children[3] = 4)"));
  Node(0, "right_children", 3).SetInt(-1);
  Node(0, "right_children", 1).SetInt(-1);
  EXPECT_THAT(Error(), HasSubstr("tree 0: node 1 has one child (left_children[1] = 3, "
                                 "right_children[1] = -1)"));
}

TEST_F(XgboostJsonCheckTest, ParentsDisagree) {
  Node(0, "parents", 3).SetInt(2);
  EXPECT_THAT(Error(), HasSubstr("tree 0: parents[3] = 2 but node 3 is a child of node 1"));
  Node(0, "parents", 3).SetInt(2147483647);  // XGBoost indexes with it at load: segfault
  EXPECT_THAT(Error(), HasSubstr("tree 0: parents[3] = 2147483647 is out of range"));
}

TEST_F(XgboostJsonCheckTest, ArrayLengthMismatch) {
  Tree(1)["split_conditions"].PopBack();
  EXPECT_THAT(Error(),
              HasSubstr("tree 1: split_conditions has 6 entries but tree_param.num_nodes is 7"));
}

TEST_F(XgboostJsonCheckTest, NumNodesLies) {
  SetString(Tree(2)["tree_param"]["num_nodes"], "9");
  EXPECT_THAT(Error(),
              HasSubstr("tree 2: left_children has 7 entries but tree_param.num_nodes is 9"));
  SetString(Tree(2)["tree_param"]["num_nodes"], "0");
  EXPECT_THAT(Error(), HasSubstr("tree 2: tree_param.num_nodes = \"0\" is out of range"));
  SetString(Tree(2)["tree_param"]["num_nodes"], "7x");
  EXPECT_THAT(Error(), HasSubstr("tree 2: tree_param.num_nodes = \"7x\" is not an integer"));
}

TEST_F(XgboostJsonCheckTest, SplitIndexOutOfRange) {
  Node(2, "split_indices", 2).SetInt(4);
  EXPECT_THAT(Error(), HasSubstr("tree 2: split_indices[2] = 4 is out of range (the model has 4 "
                                 "features)"));
  Node(2, "split_indices", 2).SetInt(-1);
  EXPECT_THAT(Error(), HasSubstr("tree 2: split_indices[2] = -1 is out of range"));
}

TEST_F(XgboostJsonCheckTest, UnreachableNodesKeepXgboostsDeletedMarker) {
  // What XGBoost's pruner leaves behind: node 1 became a leaf, nodes 3 and 4 are deleted (split
  // index 2147483647) but still listed, with their parent.
  Node(0, "left_children", 1).SetInt(-1);
  Node(0, "right_children", 1).SetInt(-1);
  Node(0, "split_indices", 3).SetInt(2147483647);
  Node(0, "split_indices", 4).SetInt(2147483647);
  EXPECT_OK(Check());
}

TEST_F(XgboostJsonCheckTest, TreeInfoLengthMismatch) {
  Booster()["model"]["tree_info"].PopBack();
  EXPECT_THAT(Error(), HasSubstr("learner.gradient_booster.model.tree_info has 2"));
}

TEST_F(XgboostJsonCheckTest, TreeInfoOutOfRange) {
  Booster()["model"]["tree_info"][1].SetInt(1);  // a binary model has one output group
  EXPECT_THAT(Error(), HasSubstr("learner.gradient_booster.model.tree_info[1] = 1 is out of "
                                 "range (the model has 1 output group)"));
}

TEST_F(XgboostJsonCheckTest, NumTreesMismatch) {
  SetString(Booster()["model"]["gbtree_model_param"]["num_trees"], "2");
  EXPECT_THAT(Error(), HasSubstr("learner.gradient_booster.model.gbtree_model_param.num_trees = "
                                 "2, learner.gradient_booster.model.trees has 3 entries"));
}

TEST_F(XgboostJsonCheckTest, TreeIdIsItsIndex) {
  Tree(2)["id"].SetInt(9);
  EXPECT_THAT(Error(), HasSubstr("tree 2: id = 9 is not the tree's index 2"));
}

TEST_F(XgboostJsonCheckTest, WrongJsonType) {
  SetString(Node(1, "split_conditions", 1), "x");
  EXPECT_THAT(Error(), HasSubstr("tree 1: split_conditions[1] = \"x\" is not a number"));
  SetString(Node(1, "split_conditions", 1), "q\"\n\xc3");  // shown escaped, whatever the bytes
  EXPECT_THAT(Error(), HasSubstr(R"(split_conditions[1] = "q\x22\x0a\xc3" is not a number)"));
  Node(1, "split_conditions", 1).SetDouble(0.5);
  Node(1, "left_children", 1).SetDouble(3.5);
  EXPECT_THAT(Error(), HasSubstr("tree 1: left_children[1] = 3.5 is not an integer"));
  Node(1, "left_children", 1).SetInt(3);
  Tree(1)["right_children"].SetObject();
  EXPECT_THAT(Error(), HasSubstr("tree 1: right_children is an object, not an array"));
}

TEST_F(XgboostJsonCheckTest, WrongParameterType) {
  Learner()["learner_model_param"]["num_feature"].SetInt(4);
  EXPECT_THAT(Error(), HasSubstr("learner.learner_model_param.num_feature = 4 is not a string "
                                 "holding an integer"));
  SetString(Learner()["learner_model_param"]["num_feature"], "0");
  EXPECT_THAT(Error(), HasSubstr("learner.learner_model_param.num_feature = \"0\" is out of "
                                 "range [1, 2147483648]"));
  SetString(Learner()["learner_model_param"]["num_feature"], "4");
  SetString(Learner()["learner_model_param"]["base_score"], "nan");
  EXPECT_THAT(Error(),
              HasSubstr("learner.learner_model_param.base_score = \"nan\" is not a finite number"));
}

TEST_F(XgboostJsonCheckTest, DefaultLeftIsABoolean) {
  Node(0, "default_left", 1).SetBool(true);  // XGBoost writes 0/1 and reads either
  EXPECT_OK(Check());
  Node(0, "default_left", 1).SetInt(2);
  EXPECT_THAT(Error(), HasSubstr("tree 0: default_left[1] = 2 is not 0, 1, true or false"));
}

TEST_F(XgboostJsonCheckTest, NonFiniteValues) {
  Node(0, "split_conditions", 3).SetDouble(std::numeric_limits<double>::infinity());
  EXPECT_THAT(Error(), HasSubstr("tree 0: split_conditions[3] = inf is not a finite float"));
  Node(0, "split_conditions", 3).SetDouble(1e300);  // finite, but not as a float
  EXPECT_THAT(Error(), HasSubstr("tree 0: split_conditions[3] = 1e+300 is not a finite float"));
  Node(0, "split_conditions", 3).SetDouble(3.4028235e38);  // XGBoost writes FLT_MAX so
  EXPECT_OK(Check());
  Node(0, "base_weights", 4).SetDouble(std::numeric_limits<double>::quiet_NaN());
  EXPECT_THAT(Error(), HasSubstr("tree 0: base_weights[4] = nan is not a finite float"));
}

// Found by xgboost_json_fuzz: rapidjson finds the first of two equal keys, libxgboost loads the
// last, so a sound first "left_children" hid the one that segfaults XGBoost.
TEST_F(XgboostJsonCheckTest, DuplicateKeyIsRejected) {
  rapidjson::Value bad(rapidjson::kArrayType);
  for (int child : {1000000000, 3, 5, -1, -1, -1, -1}) bad.PushBack(child, doc_.GetAllocator());
  Tree(0).AddMember("left_children", bad, doc_.GetAllocator());  // after the sound one
  EXPECT_THAT(Error(), HasSubstr("learner.gradient_booster.model.trees[0] has the key "
                                 "\"left_children\" twice (XGBoost would load the last one)"));
}

TEST_F(XgboostJsonCheckTest, DuplicateTopLevelKeyIsRejected) {
  EXPECT_THAT(CheckXgboostModelJson(R"({"learner":{},"learner":{}})").message(),
              HasSubstr("the top-level object has the key \"learner\" twice"));
}

TEST_F(XgboostJsonCheckTest, DeepNesting) {
  EXPECT_THAT(CheckXgboostModelJson(std::string(100000, '[')).message(),
              HasSubstr("JSON nested deeper than 100 levels"));
  std::string model = kModel;
  const std::string attributes = "\"attributes\":";
  model.insert(model.find(attributes) + attributes.size(),
               std::string(200, '[') + std::string(200, ']') + ",\"x\":");
  EXPECT_THAT(CheckXgboostModelJson(model).message(), HasSubstr("JSON nested deeper than 100"));
}

TEST_F(XgboostJsonCheckTest, NotAModel) {
  EXPECT_THAT(CheckXgboostModelJson("").message(), HasSubstr("malformed JSON at offset 0"));
  EXPECT_THAT(CheckXgboostModelJson("binf\x01\x02").message(), HasSubstr("malformed JSON"));
  EXPECT_THAT(CheckXgboostModelJson("[1]").message(),
              HasSubstr("the model is an array, not a JSON object"));
  EXPECT_THAT(CheckXgboostModelJson("{}").message(), HasSubstr("learner is missing"));
  std::string truncated(kModel);
  truncated.resize(truncated.size() / 2);
  EXPECT_THAT(CheckXgboostModelJson(truncated).message(), HasSubstr("malformed JSON"));
}

TEST_F(XgboostJsonCheckTest, UnknownBooster) {
  SetString(Booster()["name"], "gbforest");
  EXPECT_THAT(Error(), HasSubstr("learner.gradient_booster.name = \"gbforest\" is not gbtree, "
                                 "dart or gblinear"));
}

TEST_F(XgboostJsonCheckTest, GblinearWeightLength) {
  Load(kLinearModel);
  rapidjson::Value& weights = Booster()["model"]["weights"];
  weights.PopBack();
  EXPECT_THAT(Error(), HasSubstr("learner.gradient_booster.model.weights has 4 entries but "
                                 "(num_feature + 1) * output groups = (4 + 1) * 1 = 5"));
  weights.PushBack(0.5, doc_.GetAllocator());
  SetString(Learner()["learner_model_param"]["num_class"], "3");  // needs 15 weights then
  EXPECT_THAT(Error(), HasSubstr("weights has 5 entries but (num_feature + 1) * output groups = "
                                 "(4 + 1) * 3 = 15"));
}

TEST_F(XgboostJsonCheckTest, DartWeightDropLength) {
  MakeDart();
  Booster()["weight_drop"].PopBack();
  EXPECT_THAT(Error(), HasSubstr("learner.gradient_booster.weight_drop has 2 entries but the "
                                 "model has 3 trees"));
}

TEST_F(XgboostJsonCheckTest, DartTreesAreChecked) {
  MakeDart();
  Booster()["gbtree"]["model"]["trees"][1]["left_children"][0].SetInt(1000000000);
  EXPECT_THAT(Error(), HasSubstr("tree 1: left_children[0] = 1000000000 is out of range"));
}

// libxgboost 1.7 aborts on a negative category and segfaults on a segment outside categories.
TEST_F(XgboostJsonCheckTest, CategoriesOutOfRange) {
  MakeCategorical();
  Node(0, "categories", 1).SetInt(-5);
  EXPECT_THAT(Error(), HasSubstr("tree 0: categories[1] = -5 is out of range [0, 16777216)"));
  Node(0, "categories", 1).SetInt(2);
  Node(0, "categories_segments", 0).SetInt(1000000000);
  EXPECT_THAT(Error(), HasSubstr("tree 0: categories_segments[0] = 1000000000, "
                                 "categories_sizes[0] = 3: not a non-empty segment"));
  Node(0, "categories_segments", 0).SetInt(1);  // 1 + 3 > 3 categories
  EXPECT_THAT(Error(), HasSubstr("categories_segments[0] = 1, categories_sizes[0] = 3"));
}

TEST_F(XgboostJsonCheckTest, CategoryListsDisagree) {
  MakeCategorical();
  Tree(0)["categories_sizes"].PopBack();
  EXPECT_THAT(Error(), HasSubstr("tree 0: categories_sizes has 0 entries but categories_nodes "
                                 "has 1"));
  MakeCategorical();
  Node(0, "categories_nodes", 0).SetInt(1);
  EXPECT_THAT(Error(), HasSubstr("tree 0: categories_nodes[0] = 1 but split_type[1] = 0"));
  MakeCategorical();
  Node(0, "split_type", 2).SetInt(1);
  EXPECT_THAT(Error(), HasSubstr("tree 0: split_type[2] = 1 but node 2 is not in "
                                 "categories_nodes"));
}

TEST_F(XgboostJsonCheckTest, CategoryBitFieldsAreBounded) {
  MakeCategorical();
  // 2^24 - 1 is a valid category, 2 MiB of bit field; 600 trees of it pass 1 GiB.
  Node(0, "categories", 2).SetInt((1 << 24) - 1);
  EXPECT_OK(Check());
  auto& a = doc_.GetAllocator();
  rapidjson::Value& trees = Booster()["model"]["trees"];
  rapidjson::Value& info = Booster()["model"]["tree_info"];
  for (int i = 3; i < 600; ++i) {
    rapidjson::Value copy(trees[0], a);
    copy["id"].SetInt(i);
    trees.PushBack(copy, a);
    info.PushBack(0, a);
  }
  SetString(Booster()["model"]["gbtree_model_param"]["num_trees"], "600");
  EXPECT_THAT(Error(), HasSubstr("the category bit fields XGBoost would build exceed 1 GiB"));
}

}  // namespace
}  // namespace dais::backends
