// tests/server/server_process.cpp — see server_process.h.
#include "server_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/cli_run.h"
#include "common/testing.h"

namespace specdec::testing {

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int connect_loopback(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool write_all(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Reads what is available within `deadline`; false at EOF / error / timeout.
bool read_some(int fd, std::string* out, double deadline) {
  const double left = deadline - now();
  if (left <= 0) return false;
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(left * 1000) + 1) <= 0) return false;
  char buf[16384];
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  if (n <= 0) return false;
  out->append(buf, static_cast<size_t>(n));
  return true;
}

// De-chunks a chunked body; *complete when the last (0) chunk was seen.
std::string dechunk(const std::string& raw, bool* complete) {
  std::string out;
  size_t pos = 0;
  *complete = false;
  for (;;) {
    const size_t eol = raw.find("\r\n", pos);
    if (eol == std::string::npos) return out;
    const size_t size = std::strtoul(raw.substr(pos, eol - pos).c_str(), nullptr, 16);
    if (size == 0) {
      *complete = true;
      return out;
    }
    if (eol + 2 + size > raw.size()) return out;
    out.append(raw, eol + 2, size);
    pos = eol + 2 + size + 2;
  }
}

}  // namespace

ServerProcess::ServerProcess(const std::string& args) {
  static int counter = 0;
  log_path_ = temp_dir() + "/serve-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".log";
  const std::string cmd = "exec '" + cli_path() + "' serve " + args + " --host 127.0.0.1 --port 0 >/dev/null 2>'" +
                          log_path_ + "' </dev/null";
  pid_ = ::fork();
  if (pid_ == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const double deadline = now() + 30.0;
  while (now() < deadline && running()) {
    const std::string text = slurp(log_path_);
    const size_t at = text.find("listening on http://127.0.0.1:");
    if (at != std::string::npos && text.find('\n', at) != std::string::npos) {
      port_ = std::atoi(text.c_str() + at + std::strlen("listening on http://127.0.0.1:"));
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

ServerProcess::~ServerProcess() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  const double deadline = now() + 10.0;
  while (now() < deadline) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

std::string ServerProcess::log() const { return slurp(log_path_); }

bool ServerProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

HttpResponse http_request(int port, const std::string& method, const std::string& path, const std::string& body,
                          const std::vector<std::string>& headers, double timeout_seconds) {
  HttpResponse response;
  const double deadline = now() + timeout_seconds;
  const int fd = connect_loopback(port);
  if (fd < 0) return response;
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  for (const auto& h : headers) request += h + "\r\n";
  if (!body.empty() || method == "POST") {
    request += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  request += "\r\n" + body;
  write_all(fd, request);  // the server may answer (413) before reading everything
  std::string raw;
  while (read_some(fd, &raw, deadline)) {
  }
  ::close(fd);
  const size_t header_end = raw.find("\r\n\r\n");
  if (header_end == std::string::npos || raw.compare(0, 5, "HTTP/") != 0) return response;
  response.status = std::atoi(raw.c_str() + raw.find(' ') + 1);
  std::istringstream lines(raw.substr(0, header_end));
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    response.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
  }
  const std::string raw_body = raw.substr(header_end + 4);
  if (response.headers["transfer-encoding"] == "chunked") {
    response.body = dechunk(raw_body, &response.complete);
  } else {
    response.body = raw_body;
    auto it = response.headers.find("content-length");
    response.complete = it == response.headers.end() || std::stoul(it->second) == raw_body.size();
  }
  return response;
}

std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) end = body.size();
    const std::string event = body.substr(pos, end - pos);
    if (event.rfind("data: ", 0) == 0) out.push_back(event.substr(6));
    pos = end + 2;
  }
  return out;
}

RawConnection::RawConnection(int port) : fd_(connect_loopback(port)) {}

RawConnection::~RawConnection() { close(); }

bool RawConnection::send_all(const std::string& bytes) { return fd_ >= 0 && write_all(fd_, bytes); }

const std::string& RawConnection::read_until(const std::string& needle, double timeout_seconds) {
  const double deadline = now() + timeout_seconds;
  while (received_.find(needle) == std::string::npos && read_some(fd_, &received_, deadline)) {
  }
  return received_;
}

void RawConnection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

double metric_value(const std::string& body, const std::string& name) {
  std::istringstream lines(body);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.size() > name.size() && line.compare(0, name.size(), name) == 0 && line[name.size()] == ' ')
      return std::stod(line.substr(name.size() + 1));
  }
  return -1;
}

}  // namespace specdec::testing
