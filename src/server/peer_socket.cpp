// server/peer_socket.cpp — see peer_socket.h.
#include "server/peer_socket.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

namespace specdec::server {

namespace {

// Numeric host and port of a socket address (as cpp-httplib reports them: getnameinfo
// NI_NUMERICHOST); false for non-IP families.
bool numeric_address(const sockaddr_storage& addr, socklen_t len, std::string* host, int* port) {
  if (addr.ss_family != AF_INET && addr.ss_family != AF_INET6) return false;
  char host_buf[NI_MAXHOST];
  char port_buf[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host_buf, sizeof host_buf, port_buf, sizeof port_buf,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  *host = host_buf;
  *port = std::atoi(port_buf);
  return true;
}

}  // namespace

int find_connection_socket(const std::string& remote_addr, int remote_port, int local_port) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const std::string name = entry.path().filename().string();
    char* end = nullptr;
    const long fd = std::strtol(name.c_str(), &end, 10);
    if (end == name.c_str() || *end != '\0') continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_len) != 0) continue;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;
    std::string local_host, peer_host;
    int local_p = -1, peer_p = -1;
    if (!numeric_address(local, local_len, &local_host, &local_p) || local_p != local_port) continue;
    if (!numeric_address(peer, peer_len, &peer_host, &peer_p) || peer_p != remote_port) continue;
    if (peer_host == remote_addr) return static_cast<int>(fd);
  }
  return -1;
}

bool peer_has_closed(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return true;
  char byte;
  const ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace specdec::server
