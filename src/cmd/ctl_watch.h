// `dais ctl watch`: a live view of the cluster: the instances' table, then one line per change of
// an instance's state and per scheduler event, as they happen (etcd watches, no polling), until
// SIGINT / SIGTERM or --for seconds.
#pragma once

#include "etcd/client.h"

namespace dais::cmd {

int WatchCluster(etcd::Client& client, double for_seconds);

}  // namespace dais::cmd
