#include "tls_certs.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace turnstile::testing {
namespace {

// Certificates outlive any test run by far, and expire soon after.
constexpr int kValidityDays = 2;

std::string new_key_and_request(const std::string& name, const std::string& subject) {
  return "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + name + ".key -out " + name +
         ".csr -subj /CN=" + subject;
}

std::string sign(const std::string& name, const std::string& ca, const std::string& extensions_file) {
  return "openssl x509 -req -in " + name + ".csr -CA " + ca + ".crt -CAkey " + ca + ".key -CAcreateserial -out " +
         name + ".crt -days " + std::to_string(kValidityDays) + " -extfile " + extensions_file;
}

std::string new_ca(const std::string& name) {
  return "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + name + ".key -out " +
         name + ".crt -days " + std::to_string(kValidityDays) + " -subj /CN=turnstile-test-" + name;
}

}  // namespace

TlsCertificates::TlsCertificates() {
  std::string dir_template = (std::filesystem::temp_directory_path() / "turnstile-tls-XXXXXX").string();
  if (mkdtemp(dir_template.data()) == nullptr) {
    throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
  }
  directory_ = dir_template;
  std::ofstream(directory_ + "/server.ext") << "subjectAltName=IP:127.0.0.1,DNS:localhost\n";
  std::ofstream(directory_ + "/client.ext") << "extendedKeyUsage=clientAuth\n";
  run(new_ca("ca"));
  run(new_ca("other-ca"));
  run(new_key_and_request("server", "localhost"));
  run(sign("server", "ca", "server.ext"));
  run(new_key_and_request("client", "turnstile-client"));
  run(sign("client", "ca", "client.ext"));
  ca_file_ = directory_ + "/ca.crt";
  other_ca_file_ = directory_ + "/other-ca.crt";
  server_cert_file_ = directory_ + "/server.crt";
  server_key_file_ = directory_ + "/server.key";
  client_cert_file_ = directory_ + "/client.crt";
  client_key_file_ = directory_ + "/client.key";
}

TlsCertificates::~TlsCertificates() {
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
}

void TlsCertificates::run(const std::string& command) const {
  const std::string line = "cd '" + directory_ + "' && " + command + " >openssl.log 2>&1";
  if (std::system(line.c_str()) != 0) {
    std::ifstream log(directory_ + "/openssl.log");
    const std::string output((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    throw std::runtime_error("generating test certificates failed: " + command + ": " + output);
  }
}

std::vector<std::string> TlsCertificates::server_args(int tls_port, bool require_client_certificate) const {
  return {"--tls-port",         std::to_string(tls_port),
          "--tls-cert-file",    server_cert_file_,
          "--tls-key-file",     server_key_file_,
          "--tls-ca-cert-file", ca_file_,
          "--tls-auth-clients", require_client_certificate ? "yes" : "no"};
}

}  // namespace turnstile::testing
