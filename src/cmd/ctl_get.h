// `dais ctl get KIND [NAME] [-o table|wide|json|yaml]` and `dais ctl describe KIND NAME`
// (docs/cluster.md, "dais ctl"): every kind the control plane stores, by its plural, singular or
// short name (nodes / node / no, deployments / deployment / deploy, ...).
#pragma once

#include <string>
#include <vector>

#include "cmd/ctl.h"
#include "etcd/client.h"

namespace dais::cmd {

// "deployments" for "deployment", "deploy", "deployments"; empty when `what` names no kind.
std::string CanonicalKind(const std::string& what);

// Every stored object of `kind` (plural, as CanonicalKind names it) as `get KIND -o json`
// prints them: a JSON array, with what the tables derive (a node's scheduling state, ...).
StatusOr<std::string> KindJson(etcd::Client& c, const std::string& kind);

int CtlGet(etcd::Client& c, const CtlOptions& o);
// Rows (the header first) as an aligned table on stdout.
void PrintTable(const std::vector<std::vector<std::string>>& rows);
int CtlDescribe(etcd::Client& c, const CtlOptions& o);

}  // namespace dais::cmd
