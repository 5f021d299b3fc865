// support/tls_certs.h
//
// Certificates for TLS tests, made by the `openssl` command in a scratch
// directory of their own (removed with the object): a CA, a server
// certificate it signed for IP:127.0.0.1 and DNS:localhost, a client
// certificate it signed (mutual TLS), and an unrelated CA that signed
// nothing the server presents. Keys are unencrypted P-256 keys.
//
// server_args() gives redis-server the options to serve TLS on a second
// port beside its plaintext one, so that RedisServer's plaintext helpers
// (readiness, command()) keep working.

#ifndef TURNSTILE_TESTS_SUPPORT_TLS_CERTS_H_
#define TURNSTILE_TESTS_SUPPORT_TLS_CERTS_H_

#include <string>
#include <vector>

namespace turnstile::testing {

class TlsCertificates {
 public:
  // Throws std::runtime_error naming the step if `openssl` fails.
  TlsCertificates();
  ~TlsCertificates();
  TlsCertificates(const TlsCertificates&) = delete;
  TlsCertificates& operator=(const TlsCertificates&) = delete;

  // redis-server arguments: --tls-port <tls_port> with the server
  // certificate and key, the CA for client certificates, and
  // --tls-auth-clients yes (require_client_certificate) or no.
  std::vector<std::string> server_args(int tls_port, bool require_client_certificate) const;

  const std::string& directory() const { return directory_; }
  const std::string& ca_file() const { return ca_file_; }
  const std::string& other_ca_file() const { return other_ca_file_; }
  const std::string& client_cert_file() const { return client_cert_file_; }
  const std::string& client_key_file() const { return client_key_file_; }
  const std::string& server_cert_file() const { return server_cert_file_; }
  const std::string& server_key_file() const { return server_key_file_; }

 private:
  // Runs `command` (a shell command line) in directory(); throws on failure.
  void run(const std::string& command) const;

  std::string directory_;
  std::string ca_file_;
  std::string other_ca_file_;
  std::string server_cert_file_;
  std::string server_key_file_;
  std::string client_cert_file_;
  std::string client_key_file_;
};

}  // namespace turnstile::testing

#endif  // TURNSTILE_TESTS_SUPPORT_TLS_CERTS_H_
