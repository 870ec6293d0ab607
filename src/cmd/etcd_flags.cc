#include "cmd/etcd_flags.h"

#include "etcd/client.h"

namespace dais::cmd {

namespace {

etcd::Tls& Flags() {
  static etcd::Tls tls;
  return tls;
}

}  // namespace

void AddEtcdTlsFlags(CLI::App* app) {
  app->add_option("--etcd-cacert", Flags().ca_file,
                  "PEM CA of etcd's certificate: talk to etcd over TLS (https:// endpoints do "
                  "too, with the system's CAs by default).");
  app->add_option("--etcd-cert", Flags().cert_file,
                  "PEM client certificate for etcd's --client-cert-auth (with --etcd-key).");
  app->add_option("--etcd-key", Flags().key_file, "PEM private key of --etcd-cert.");
}

void ApplyEtcdTlsFlags() {
  if (Flags().active()) etcd::SetDefaultTls(Flags());
}

}  // namespace dais::cmd
