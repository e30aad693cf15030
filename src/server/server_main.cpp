// server/server_main.cpp — the `specdec-server` program: the OpenAI-compatible HTTP server (see
// http_server.h, scheduler.h). `specdec serve ARGS` execs it with ARGS (src/cli/cmd_serve.cpp);
// it is a program of its own so that only it links cpp-httplib (and libssl, libcrypto, ...).
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/options.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "specdec/chat_template.h"
#include "specdec/error.h"
#include "specdec/gguf.h"

namespace specdec::cli {

namespace {

using namespace specdec::server;

struct ServeArgs {
  EngineCliOptions engine;
  HttpOptions http;
  SchedulerOptions scheduler;
  std::string chat_template;   // --chat-template NAME ("" = from the GGUF)
  std::string alias;           // --alias: the model id clients use
  int max_body_bytes = 1 << 20;
};

// Resolves the chat family: --chat-template NAME, else the GGUF's tokenizer.chat_template.
void choose_chat_template(const ServeArgs& args, Engine& engine, ServedModel* model) {
  if (!args.chat_template.empty()) {
    model->chat_family = chat_family_from_name(args.chat_template);
    if (!model->chat_family)
      throw Error("--chat-template '" + args.chat_template + "' is not supported; use one of: " + chat_family_names());
    return;
  }
  const std::string jinja = engine.target().gguf().get_string_or("tokenizer.chat_template", "");
  if (jinja.empty()) {
    model->chat_error = "model '" + model->id +
                        "' has no chat template (tokenizer.chat_template); start the server with --chat-template NAME "
                        "(one of: " + chat_family_names() + ")";
    return;
  }
  model->chat_family = detect_chat_family(jinja);
  if (!model->chat_family) {
    std::string head = jinja.substr(0, 80);
    for (char& c : head)
      if (c == '\n') c = ' ';
    model->chat_error = "the chat template of model '" + model->id + "' (tokenizer.chat_template = \"" + head +
                        "...\") is not supported; supported families: " + chat_family_names() +
                        "; force one with --chat-template NAME";
    std::fprintf(stderr, "warning: %s\n", model->chat_error.c_str());
  }
}

void run_serve(ServeArgs& args) {
  // Signals go to one waiting thread (set up before any other thread starts).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (args.max_body_bytes < 1024) throw Error("--max-body " + std::to_string(args.max_body_bytes) + " must be >= 1024");
  if (args.http.request_timeout <= 0) throw Error("--timeout must be > 0");
  args.http.max_body_bytes = static_cast<size_t>(args.max_body_bytes);

  Engine engine(args.engine.to_engine_options());
  ServedModel model;
  model.engine = &engine;
  const std::filesystem::path path(args.engine.model);
  model.id = args.alias.empty() ? path.filename().string() : args.alias;
  model.accepted_names = {model.id, path.filename().string(), path.stem().string(), args.engine.model};
  const Tokenizer& tokenizer = engine.tokenizer();
  if (tokenizer.special().bos >= 0) model.bos_text = std::string(tokenizer.token_text(tokenizer.special().bos));
  if (tokenizer.special().eos >= 0) model.eos_text = std::string(tokenizer.token_text(tokenizer.special().eos));
  choose_chat_template(args, engine, &model);
  const EngineOptions& engine_options = engine.options();
  model.default_spec.method = engine.method();
  model.default_spec.draft_max = engine_options.spec.draft_max;
  model.default_spec.draft_min = engine_options.spec.draft_min;
  model.default_spec.p_min = engine_options.spec.draft_p_min;
  model.default_spec.adaptive = engine_options.spec.adaptive;

  Metrics metrics;
  Scheduler scheduler(engine, args.scheduler, &metrics);
  HttpServer server(model, scheduler, metrics, args.http);
  const int port = server.bind();
  std::thread signal_thread([&] {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    std::fprintf(stderr, "signal %d: shutting down\n", signal_number);
    server.stop();
  });
  std::fprintf(stderr,
               "specdec serve: model %s (context %d, chat template %s), speculation %s (draft_max %d%s), %d slots, "
               "queue %d\nlistening on http://%s:%d\n",
               model.id.c_str(), engine.n_ctx(), model.chat_family ? chat_family_name(*model.chat_family) : "none",
               spec_method_name(engine.method()), model.default_spec.draft_max,
               model.default_spec.adaptive ? ", load-aware" : ", fixed", scheduler.n_slots(), scheduler.queue_max(),
               args.http.host.c_str(), port);
  std::fflush(stderr);
  server.listen();
  // listen() returned: stopped by a signal (or the socket failed); let the signal thread go.
  pthread_kill(signal_thread.native_handle(), SIGTERM);
  signal_thread.join();
}

void setup_serve(CLI::App* cmd) {
  auto args = std::make_shared<ServeArgs>();
  args->engine.add_to(cmd);
  cmd->add_option("--host", args->http.host, "address to bind (default 127.0.0.1, loopback only)");
  cmd->add_option("--port", args->http.port, "port (0: any free port, printed at start)");
  cmd->add_option("--api-key", args->http.api_key, "require 'Authorization: Bearer KEY' on /v1/*");
  cmd->add_option("--parallel,--np", args->scheduler.n_slots, "slots: sequences decoded together (default 1)")
      ->check(integer_at_least(1));
  cmd->add_option("--queue", args->scheduler.queue_max, "requests that may wait for a slot before 503 (default 16)")
      ->check(integer_at_least(0));
  cmd->add_option("--timeout", args->http.request_timeout, "seconds a request may take, queue included (default 600)");
  cmd->add_option("--max-body", args->max_body_bytes, "largest request body in bytes (default 1 MiB)");
  cmd->add_option("--http-threads", args->http.n_threads, "HTTP workers (default: slots + queue + 8)");
  cmd->add_option("--prefill-chunk", args->scheduler.prefill_chunk, "prompt rows per batched forward (default 256)")
      ->check(integer_at_least(1));
  cmd->add_flag("!--no-draft-batching", args->scheduler.batch_drafts,
                "each slot drafts with the draft model alone instead of sharing one draft forward per level");
  cmd->add_option("--chat-template", args->chat_template,
                  "chat template family instead of the model's: " + chat_family_names());
  cmd->add_option("--alias", args->alias, "model id reported by /v1/models (default: the file name)");
  cmd->callback([args] { run_serve(*args); });
}

}  // namespace

}  // namespace specdec::cli

int main(int argc, char** argv) {
  CLI::App app{"OpenAI-compatible HTTP server with speculative decoding (also run as `specdec serve`)",
               "specdec-server"};
  specdec::cli::setup_serve(&app);
  return specdec::cli::parse_and_run(app, argc, argv);  // as `specdec` does, `-md` included
}
