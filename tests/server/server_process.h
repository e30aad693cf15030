// tests/server/server_process.h — runs the real `specdec serve` on a free loopback port, and a
// small raw HTTP/1.1 client (so tests control every byte and can hang up mid-stream).
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace specdec::testing {

class ServerProcess {
 public:
  // Starts `specdec serve ARGS --host 127.0.0.1 --port 0` (args are shell words) and waits up
  // to 30 s for its "listening on" line. started() is false (and log() says why) otherwise.
  explicit ServerProcess(const std::string& args);
  ~ServerProcess();  // SIGTERM, then SIGKILL after 10 s
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  bool started() const { return port_ > 0; }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const;  // its stderr so far
  bool running();           // the process has not exited

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  std::string log_path_;
};

struct HttpResponse {
  int status = 0;                               // 0: no response (connection failed / timed out)
  std::map<std::string, std::string> headers;   // names lower-case
  std::string body;                             // de-chunked
  bool complete = false;                        // the body ended properly (length / last chunk)
};

// One request on a fresh connection (Connection: close); the whole exchange is bounded by
// timeout_seconds. body_bytes is sent verbatim (may be invalid UTF-8).
HttpResponse http_request(int port, const std::string& method, const std::string& path,
                          const std::string& body_bytes = {}, const std::vector<std::string>& headers = {},
                          double timeout_seconds = 60.0);

// The `data:` payloads of a server-sent-events body, in order (comments skipped).
std::vector<std::string> sse_data(const std::string& body);

// A connection that is read incrementally and can be dropped at any point.
class RawConnection {
 public:
  explicit RawConnection(int port);  // connects (check ok())
  ~RawConnection();
  bool ok() const { return fd_ >= 0; }
  bool send_all(const std::string& bytes);
  // Reads until `needle` has been received (or timeout / EOF); returns everything read so far.
  const std::string& read_until(const std::string& needle, double timeout_seconds);
  void close();

 private:
  int fd_ = -1;
  std::string received_;
};

// Value of a Prometheus sample line `name` (exact, labels included) in a /metrics body; -1 if absent.
double metric_value(const std::string& metrics_body, const std::string& name);

}  // namespace specdec::testing
