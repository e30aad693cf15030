// server/http_server.cpp — see http_server.h.
#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "server/metrics.h"
#include "server/openai_format.h"
#include "server/peer_socket.h"
#include "server/request_parse.h"
#include "server/scheduler.h"
#include "specdec/error.h"
#include "specdec/timer.h"

namespace specdec::server {

using nlohmann::json;

namespace {

constexpr auto kPollInterval = std::chrono::milliseconds(1000);  // SSE keep-alive / disconnect probe
constexpr auto kPeerProbeInterval = std::chrono::milliseconds(50);  // non-streaming disconnect probe

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void set_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

// Waits for the job's Done event (the scheduler always sends one: at the latest at the
// deadline), collecting text events on the way. Returns false if none came within `limit`.
bool wait_done(Job& job, double limit_seconds) {
  const double end = now_seconds() + limit_seconds;
  while (now_seconds() < end) {
    auto event = job.wait_event(kPollInterval);
    if (event && event->kind == JobEvent::Kind::Done) return true;
  }
  return false;
}

const char* endpoint_path(Endpoint endpoint) {
  return endpoint == Endpoint::Completions ? "/v1/completions" : "/v1/chat/completions";
}

}  // namespace

HttpServer::HttpServer(const ServedModel& model, Scheduler& scheduler, Metrics& metrics, const HttpOptions& options)
    : model_(model), scheduler_(scheduler), metrics_(metrics), options_(options),
      http_(std::make_unique<httplib::Server>()) {
  // Every waiting or streaming request holds a worker: size the pool above slots + queue so
  // that the scheduler, not the library's backlog, decides who waits (and who gets 503).
  const int n_threads = options.n_threads > 0 ? options.n_threads : scheduler.n_slots() + scheduler.queue_max() + 8;
  listen_backlog_workers_ = n_threads;
  http_->new_task_queue = [n_threads] { return new httplib::ThreadPool(static_cast<size_t>(n_threads)); };
  // Each streamed token is a small write after the headers: without TCP_NODELAY, Nagle holds it
  // until the client's (delayed, ~40 ms) ACK of the previous segment arrives.
  http_->set_tcp_nodelay(true);
  // The library listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, compiled into Debian's
  // library): a burst of new connections overflows it and the kernel drops their handshakes,
  // which the clients retry only after 1 s. Remember the listening socket to widen it in bind().
  http_->set_socket_options([this](int sock) {
    httplib::default_socket_options(sock);
    listen_socket_ = sock;
  });
  http_->set_payload_max_length(options.max_body_bytes);
  http_->set_read_timeout(options.io_timeout, 0);
  http_->set_write_timeout(options.io_timeout, 0);
  install_routes();
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port < 0) throw Error("cannot bind to any port on " + options_.host);
  } else if (!http_->bind_to_port(options_.host, port)) {
    throw Error("cannot bind to " + options_.host + ":" + std::to_string(port) + " (in use, or not a local address?)");
  }
  // listen() again on a listening socket only changes its backlog (the kernel caps it at
  // net.core.somaxconn): room for every worker's connection plus a burst.
  if (listen_socket_ >= 0) ::listen(listen_socket_, std::max(128, 2 * listen_backlog_workers_));
  return port;
}

void HttpServer::listen() { http_->listen_after_bind(); }

void HttpServer::stop() { http_->stop(); }

void HttpServer::log_line(const std::string& line) {
  std::lock_guard lock(log_mutex_);
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

void HttpServer::check_auth(const httplib::Request& req) const {
  if (options_.api_key.empty()) return;
  const std::string header = req.get_header_value("Authorization");
  if (header.empty()) throw ApiError(401, "unauthorized", "missing API key: send 'Authorization: Bearer KEY'");
  if (header != "Bearer " + options_.api_key) throw ApiError(401, "unauthorized", "invalid API key");
}

void HttpServer::reply_error(httplib::Response& res, const ApiError& error, const char* endpoint, uint64_t id) {
  set_json(res, error.status, error_json(error.status, error.what(), error.param));
  if (error.status == 503) res.set_header("Retry-After", "1");
  metrics_.count_error(error.kind);
  metrics_.count_request(endpoint, error.status);
  char line[160];
  std::snprintf(line, sizeof line, "request %llu %s status %d (%s): ", static_cast<unsigned long long>(id), endpoint,
                error.status, error.kind.c_str());
  log_line(line + std::string(error.what()));
}

void HttpServer::install_routes() {
  http_->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    set_json(res, 200, json{{"status", "ok"}, {"slots_busy", scheduler_.busy_slots()},
                            {"slots_total", scheduler_.n_slots()}, {"queue_length", scheduler_.queue_length()}});
  });
  http_->Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    SchedulerGauges g;
    g.queue_length = scheduler_.queue_length();
    g.busy_slots = scheduler_.busy_slots();
    g.n_slots = scheduler_.n_slots();
    g.current_k = scheduler_.current_k();
    res.set_content(metrics_.render(g), "text/plain; version=0.0.4");
  });
  http_->Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      check_auth(req);
    } catch (const ApiError& e) {
      reply_error(res, e, "/v1/models", 0);
      return;
    }
    const auto& config = model_.engine->target().config();
    json m = {{"id", model_.id}, {"object", "model"}, {"created", static_cast<int64_t>(std::time(nullptr))},
              {"owned_by", "specdec"},
              {"meta", {{"n_ctx", model_.engine->n_ctx()}, {"n_vocab", config.n_vocab}, {"n_layers", config.n_layers},
                        {"chat_template", model_.chat_family ? chat_family_name(*model_.chat_family) : ""}}}};
    set_json(res, 200, json{{"object", "list"}, {"data", json::array({m})}});
    metrics_.count_request("/v1/models", 200);
  });
  http_->Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(Endpoint::Completions, req, res);
  });
  http_->Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_generation(Endpoint::ChatCompletions, req, res);
  });
  // Errors the library produces itself (unknown path 404, body over the limit 413, ...) get a
  // JSON body too.
  http_->set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req,
                                                                     httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message = "HTTP " + std::to_string(res.status);
    std::string kind = "bad_request";
    if (res.status == 404) {
      message = "no such endpoint: " + req.method + " " + req.path;
      kind = "not_found";
    } else if (res.status == 413) {
      message = "request body larger than the limit of " + std::to_string(options_.max_body_bytes) +
                " bytes (--max-body)";
      kind = "too_large";
    } else if (res.status == 405) {
      message = "method " + req.method + " not allowed on " + req.path;
    }
    res.set_content(dump(error_json(res.status, message)), "application/json");
    metrics_.count_error(kind);
    metrics_.count_request(req.path, res.status);
    return httplib::Server::HandlerResponse::Handled;
  }));
  http_->set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string message = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      message += std::string(": ") + e.what();
    } catch (...) {
    }
    set_json(res, 500, error_json(500, message));
    metrics_.count_error("internal");
    metrics_.count_request(req.path, 500);
  });
}

void HttpServer::handle_generation(Endpoint endpoint, const httplib::Request& req, httplib::Response& res) {
  const uint64_t id = next_id_.fetch_add(1);
  const char* path = endpoint_path(endpoint);
  ParsedRequest parsed;
  std::shared_ptr<Job> job;
  try {
    check_auth(req);
    parsed = parse_request(endpoint, req.body, model_);
    job = std::make_shared<Job>(id, parsed.job, now_seconds() + options_.request_timeout);
    if (!scheduler_.submit(job))
      throw ApiError(503, "queue_full",
                     "server busy: all " + std::to_string(scheduler_.n_slots()) + " slots are in use and the queue of " +
                         std::to_string(scheduler_.queue_max()) + " requests is full; retry later");
  } catch (const ApiError& e) {
    reply_error(res, e, path, id);
    return;
  } catch (const Error& e) {
    reply_error(res, ApiError(400, "bad_request", e.what()), path, id);
    return;
  }
  ResponseIds ids{(endpoint == Endpoint::Completions ? "cmpl-" : "chatcmpl-") + std::to_string(id),
                  static_cast<int64_t>(std::time(nullptr)), model_.id};

  // Called once the job is done (answered or abandoned): metrics and the request's log line.
  auto account = [this, path, id](const JobResult& r, int status) {
    metrics_.count_request(path, status);
    if (r.finish_reason == "cancelled") metrics_.count_error("cancelled");
    if (r.finish_reason == "error") metrics_.count_error("internal");
    if (r.timed_out) metrics_.count_error("timeout");
    metrics_.record_job(r);
    char line[512];
    std::snprintf(line, sizeof line,
                  "request %llu %s status %d: prompt %d tokens (%d cached), generated %d, finish %s%s | queue %.3f s, "
                  "ttft %.3f s, decode %.3f s (%.1f tok/s) | spec %s: drafted %lld, accepted %lld, acceptance %.2f, "
                  "%.2f tokens/pass",
                  static_cast<unsigned long long>(id), path, status, r.n_prompt, r.n_cached, r.n_generated,
                  r.finish_reason.c_str(), r.timed_out ? " (timed out)" : "", r.queue_seconds, r.ttft_seconds,
                  r.decode_seconds, r.decode_seconds > 0 ? r.n_generated / r.decode_seconds : 0.0, r.method.c_str(),
                  static_cast<long long>(r.n_drafted), static_cast<long long>(r.n_accepted),
                  r.n_drafted ? double(r.n_accepted) / double(r.n_drafted) : 0.0,
                  r.n_target_passes ? double(r.n_generated) / double(r.n_target_passes) : 0.0);
    log_line(line);
  };

  if (!parsed.stream) {
    // Wait for the result, probing the connection: a client that hung up cancels its job (the
    // slot is freed at the scheduler's next iteration) instead of holding it until the timeout.
    const int fd = find_connection_socket(req.remote_addr, req.remote_port, req.local_port);
    const double end = now_seconds() + options_.request_timeout + 60.0;
    bool done = false;
    while (!done && now_seconds() < end) {
      auto event = job->wait_event(fd >= 0 ? kPeerProbeInterval : kPollInterval);
      if (event && event->kind == JobEvent::Kind::Done) {
        done = true;
      } else if (fd >= 0 && !job->cancelled() && peer_has_closed(fd)) {
        job->cancel();
      }
    }
    SPECDEC_CHECK(done, "request " + std::to_string(id) + " never finished");
    const JobResult& r = job->result();
    if (job->cancelled()) {  // nobody reads the reply
      set_json(res, 499, error_json(499, "client closed the connection"));
      account(r, 499);
      return;
    }
    if (r.finish_reason == "error" || r.finish_reason == "cancelled") {
      const int status = r.finish_reason == "error" ? 500 : 503;
      set_json(res, status, error_json(status, r.error));
      account(r, status);
      return;
    }
    set_json(res, 200, response_json(parsed, ids, r));
    account(r, 200);
    return;
  }

  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream", [this, job, parsed, ids, account](size_t, httplib::DataSink& sink) {
        auto send = [&](const std::string& data) { return sink.write(data.data(), data.size()); };
        auto send_json = [&](const json& j) { return send("data: " + dump(j) + "\n\n"); };
        auto abandon = [&] {  // the client went away: free the slot, account once it is freed
          job->cancel();
          if (wait_done(*job, options_.request_timeout + 60.0)) account(job->result(), 499);
          return false;
        };
        bool first = true;
        size_t text_offset = 0;
        if (parsed.endpoint == Endpoint::ChatCompletions) {
          if (!send_json(chunk_json(parsed, ids, "", nullptr, 0, true))) return abandon();
          first = false;
        }
        for (;;) {
          auto event = job->wait_event(kPollInterval);
          if (!event) {
            if (!send(": keep-alive\n\n")) return abandon();
            continue;
          }
          if (event->kind == JobEvent::Kind::Text) {
            if (!send_json(chunk_json(parsed, ids, event->text, &event->logprobs, text_offset, first)))
              return abandon();
            text_offset += event->text.size();
            first = false;
            continue;
          }
          const JobResult& r = job->result();
          int status = 200;
          if (r.finish_reason == "error" || r.finish_reason == "cancelled") {
            status = r.finish_reason == "error" ? 500 : 503;
            send_json(error_json(status, r.error));
          } else {
            send_json(final_chunk_json(parsed, ids, r));
            if (parsed.include_usage) send_json(usage_chunk_json(parsed, ids, r));
          }
          send("data: [DONE]\n\n");
          sink.done();
          account(r, status);
          return true;
        }
      });
}

}  // namespace specdec::server
