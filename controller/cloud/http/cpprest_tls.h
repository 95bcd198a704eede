// The cpprestsdk transports of http_transport.h with a private CA: servers are verified against
// `ca_file` (PEM) as well as the system's trust store. For a team's own sbxd whose certificate a
// private CA signed (sbxctl --certificate-authority); the cloud clients use the plain factories.
// Thread-safety as the plain transports.
#pragma once

#include <memory>
#include <string>

#include "controller/cloud/http/http_transport.h"

namespace sbx::controller::http {

struct CppRestTlsOptions {
  std::string ca_file;  // empty: the system's trust store only
};

std::unique_ptr<HttpTransport> MakeCppRestTransport(const CppRestTlsOptions& tls);
std::unique_ptr<StreamingTransport> MakeCppRestStreamingTransport(const CppRestTlsOptions& tls);

}  // namespace sbx::controller::http
