// The cluster's keys in etcd (docs/cluster.md). Every role builds them here.
//   /dais/nodes/<node>                    the node's registration (JSON), under its lease
//   /dais/instances/<node>/<model>        the state of a model instance on the node (JSON),
//                                         under the node's lease
//   /dais/assignments/<node>/<model>      what the scheduler wants the node to run (JSON)
//   /dais/cordoned/<node>                 "cordon" (no new instances) or "drain" (and move the
//                                         ones it has), written by `dais ctl`
#pragma once

#include <string>

namespace dais::cluster {

inline constexpr const char* kNodesPrefix = "/dais/nodes/";
inline constexpr const char* kInstancesPrefix = "/dais/instances/";
inline constexpr const char* kAssignmentsPrefix = "/dais/assignments/";
inline constexpr const char* kCordonedPrefix = "/dais/cordoned/";

inline std::string NodeKey(const std::string& node) { return kNodesPrefix + node; }
inline std::string InstancesPrefix(const std::string& node) {
  return kInstancesPrefix + node + "/";
}
inline std::string AssignmentsPrefix(const std::string& node) {
  return kAssignmentsPrefix + node + "/";
}

}  // namespace dais::cluster
