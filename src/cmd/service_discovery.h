// Prometheus service discovery of a dais cluster: the scheduler's metrics port answers
// GET /sd/targets[?role=node|gateway] with the nodes and gateways registered in etcd, in
// Prometheus's http_sd_config format ([{"targets": ["host:port"], "labels": {...}}]), so that a
// Prometheus scrapes what joins and stops scraping what leaves (docs/operations.md).
#pragma once

#include <string>
#include <string_view>

#include "dais/status.h"
#include "etcd/client.h"

namespace dais::cmd {

// One target group per node and per gateway. A node's target is its metrics endpoint ("metrics"
// in /dais/nodes/<id>; a node registered by an older dais: its HTTP endpoint, which serves
// /metrics unless --metrics-port moved it). Labels: dais_role (node / gateway), dais_node or
// dais_gateway, and a node's labels as __meta_dais_label_<name> (for relabelling).
// `role` empty: both; anything but node / gateway: InvalidArgument.
StatusOr<std::string> PrometheusTargets(etcd::Client& etcd, std::string_view role);

}  // namespace dais::cmd
