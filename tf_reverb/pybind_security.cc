// Bindings of transport security (server/security/): ServerSecurity for
// Server(host=, credentials=, auth_token_file=), ChannelSecurity for
// clients, and the per-address registry the TF ops and datasets read.
// Secrets (keys, tokens) are passed in and never returned or printed.
#include <memory>
#include <string>

#include "pybind11/pybind11.h"
#include "server/security/channel_credentials.h"
#include "server/security/server_credentials.h"
#include "server/service/server.h"
#include "tf_reverb/pybind_common.h"

namespace py = pybind11;

namespace tf_reverb {

void RegisterSecurityBindings(py::module_& m) {
  py::class_<ServerSecurity, std::shared_ptr<ServerSecurity>>(m, "ServerSecurity")
      .def(py::init([](const std::string& host, const py::bytes& certificate_chain,
                       const py::bytes& private_key, const py::bytes& client_ca,
                       const std::string& auth_token_file) {
             ServerSecurityOptions options;
             options.host = host;
             options.tls_certificate_chain = certificate_chain;
             options.tls_private_key = private_key;
             options.tls_client_ca = client_ca;
             options.auth_token_file = auth_token_file;
             return ValueOrRaise(ServerSecurity::Create(std::move(options)));
           }),
           py::arg("host") = "", py::arg("certificate_chain") = py::bytes(),
           py::arg("private_key") = py::bytes(), py::arg("client_ca") = py::bytes(),
           py::arg("auth_token_file") = "")
      .def("exposure_warning", &ServerSecurity::ExposureWarning)
      .def("reload_auth_tokens",
           [](ServerSecurity& security) {
             if (security.authenticator() == nullptr) {
               throw py::value_error("This server was started without auth_token_file.");
             }
             return ValueOrRaise(security.authenticator()->Reload());
           })
      .def("debug_string", &ServerSecurity::DebugString);

  m.def(
      "register_channel_security",
      [](const std::string& address, bool tls, const py::bytes& root_certificates,
         const py::bytes& certificate_chain, const py::bytes& private_key,
         const std::string& server_name, const std::string& auth_token) {
        ChannelSecurity security;
        security.tls = tls;
        security.root_certificates = root_certificates;
        security.certificate_chain = certificate_chain;
        security.private_key = private_key;
        security.server_name = server_name;
        security.auth_token = auth_token;
        grpc::ChannelArguments args;
        // Invalid combinations fail here, not at the first call.
        absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> built =
            BuildChannelCredentials(address, security, &args);
        MaybeRaise(built.status());
        RegisterChannelSecurity(address, security);
      },
      py::arg("address"), py::arg("tls"), py::arg("root_certificates"),
      py::arg("certificate_chain"), py::arg("private_key"), py::arg("server_name"),
      py::arg("auth_token"));

  m.def("unregister_channel_security", &UnregisterChannelSecurity, py::arg("address"));

  m.def("server_security", [](const Server& server) { return server.security(); });
}

}  // namespace tf_reverb
