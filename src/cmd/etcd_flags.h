// --etcd-cacert / --etcd-cert / --etcd-key (etcdctl's --cacert / --cert / --key) for every
// command that talks to etcd: one process-wide setting (etcd::SetDefaultTls), so that each of a
// role's etcd clients (registration, watches, leader election) uses it. docs/tls.md.
#pragma once

#include <CLI/CLI.hpp>

namespace dais::cmd {

void AddEtcdTlsFlags(CLI::App* app);
// After parsing: hands the flags to etcd::SetDefaultTls when any was given.
void ApplyEtcdTlsFlags();

}  // namespace dais::cmd
