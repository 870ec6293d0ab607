// Validating an XGBoost JSON model (xgboost.json) before libxgboost sees it. Model files are
// untrusted input and libxgboost 1.7 trusts them: a child index out of range segfaults
// XGBoosterLoadModel (left_children[0] = 1000000000), a child pointing back at an ancestor makes
// it spin forever (left_children[0] = 0), a bad parent index, categories segment or tree_info
// entry writes or reads outside its arrays, and the same faults deeper in a tree, or a split on a
// feature the model does not have, load fine and then hang or read outside the model at
// inference. Each of these was reproduced on Debian 12's XGBoost 1.7.4 before it was checked here.
//
// CheckXgboostModelJson is pure (no I/O, no libxgboost, no global state; safe from any thread).
// It parses with json::ParseJson (iterative, nesting limit 100; NaN and Infinity accepted, since
// XGBoost writes NaN as the threshold of a categorical split) and checks, against the schema
// XGBoost 1.7 writes:
//  - no object has a key twice: libxgboost loads the last of equal keys, this check would read
//    the first (a sound "left_children" followed by one that crashes XGBoost).
//  - learner.learner_model_param: num_feature, num_class, base_score (and num_target when
//    present) are strings of numbers; 1 <= num_feature <= 2^31; num_class, num_target at most
//    2^16; base_score finite. The model has G = max(1, num_class, num_target) output groups.
//  - learner.objective.name is a string; learner.gradient_booster.name is gbtree, dart (the trees
//    under gradient_booster.gbtree, and weight_drop has one number per tree) or gblinear
//    (model.weights has (num_feature + 1) * G finite numbers).
//  - gbtree: model.gbtree_model_param.num_trees equals the length of model.trees and of
//    model.tree_info; each tree_info entry is an integer in [0, G); tree t has "id" t (XGBoost
//    files tree t under its id and leaves a null tree at an id nobody names).
//  - each tree: tree_param.num_nodes N >= 1 and every per-node array (left_children,
//    right_children, parents, split_indices, split_conditions, default_left, loss_changes,
//    sum_hessian, split_type when present) has exactly N entries of the right JSON type,
//    base_weights N * size_leaf_vector when size_leaf_vector > 1, else N. On every node: children
//    are -1 or in [0, N); a node is a leaf iff its left child is -1, and then its right child is
//    -1 too; parents[0] is 2147483647 or -1 (both load as "no parent"; XGBoost writes the former)
//    and every other parents[i] is in [0, N) (XGBoost indexes with it at load, reachable or not);
//    split_type is 0 or 1; default_left 0, 1, true or false; split_conditions and base_weights
//    are numbers that stay finite as floats, except the threshold of a categorical split
//    (XGBoost writes NaN there); loss_changes and sum_hessian are numbers.
//    From the root, walked with an explicit stack: no node is reached twice (so no cycle, no
//    shared child, and the root is nobody's child), parents[child] is the node that reached it,
//    and every split's split_indices entry is in [0, num_feature). Unreachable nodes are the ones
//    XGBoost's pruner deleted (split index 2147483647): only their types and ranges are checked.
//  - categorical splits: categories_nodes, categories_segments and categories_sizes have one
//    entry per node whose split_type is 1, in increasing node order; each node's segment lies
//    within categories, holds at least one category, and every category is in [0, 2^24) (XGBoost
//    aborts on a negative one). XGBoost expands each node's categories to a bit field as wide as
//    its largest category, so the fields of the whole model may total at most 1 GiB.
// Returns OkStatus for a sound model, else InvalidArgument naming the first fault: the tree, the
// field, the node and the bad value, e.g. "tree 3: left_children[0] = 1000000000 is out of range
// (the tree has 15 nodes)". Fields XGBoost ignores or checks itself with a clean error
// (attributes, feature_names, feature_types, num_deleted, version, the objective beyond its name
// being a string) are not checked; neither are the JSON spellings XGBoost's own reader refuses
// with a clean error and rapidjson accepts (leading whitespace; \u escapes, kept undecoded).
#pragma once

#include <string_view>

#include "dais/status.h"

namespace dais::backends {

Status CheckXgboostModelJson(std::string_view json);

}  // namespace dais::backends
