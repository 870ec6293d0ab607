#include "cmd/grpc_credentials.h"

#include <grpcpp/security/credentials.h>

#include "tls/context.h"

namespace dais::cmd {

StatusOr<std::shared_ptr<grpc::ChannelCredentials>> GrpcClientCredentials(
    const tls::ClientConfig& c) {
  if (!c.active()) return grpc::InsecureChannelCredentials();
  ASSIGN_OR_RETURN(tls::PemTexts pem, tls::ReadPemFiles(c));
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = pem.ca;
  o.pem_private_key = pem.key;
  o.pem_cert_chain = pem.cert;
  return grpc::SslCredentials(o);
}

}  // namespace dais::cmd
