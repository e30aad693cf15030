// server/http_server.h — the HTTP endpoints (cpp-httplib) in front of the scheduler.
//
//   POST /v1/completions, POST /v1/chat/completions   (JSON, or SSE with "stream": true)
//   GET  /v1/models, GET /health, GET /metrics          (Prometheus text)
//
// Every error is a JSON body {"error": {...}} with a 4xx/5xx status. Each generation request
// holds one HTTP worker while it waits, so the worker pool is sized above slots + queue: the
// requests beyond that are refused by the scheduler's queue (503), not left invisible in the
// library's own backlog.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "server/api_types.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace specdec::server {

class Scheduler;
class Metrics;

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                   // 0: any free port (the bound one is printed)
  std::string api_key;               // "" = no authentication
  size_t max_body_bytes = 1 << 20;   // larger request bodies get 413
  int n_threads = 0;                 // HTTP workers; 0 = slots + queue + 8
  double request_timeout = 600.0;    // seconds from submission until a generation is cut off
  int io_timeout = 30;               // seconds a socket read / write may block
};

class HttpServer {
 public:
  // model, scheduler and metrics must outlive the server.
  HttpServer(const ServedModel& model, Scheduler& scheduler, Metrics& metrics, const HttpOptions& options);
  ~HttpServer();

  // Binds the listening socket; returns the port. Throws Error when it cannot bind.
  int bind();
  // Serves until stop() (blocking). Requires bind().
  void listen();
  // Thread-safe: ends listen().
  void stop();

 private:
  void install_routes();
  void handle_generation(Endpoint endpoint, const httplib::Request& req, httplib::Response& res);
  void check_auth(const httplib::Request& req) const;
  void reply_error(httplib::Response& res, const ApiError& error, const char* endpoint, uint64_t id);
  void log_line(const std::string& line);

  const ServedModel& model_;
  Scheduler& scheduler_;
  Metrics& metrics_;
  HttpOptions options_;
  std::unique_ptr<httplib::Server> http_;
  int listen_socket_ = -1;             // the listening socket (set while binding)
  int listen_backlog_workers_ = 0;     // HTTP workers, to size the listen backlog
  std::atomic<uint64_t> next_id_{1};
  std::mutex log_mutex_;
};

}  // namespace specdec::server
