// server/peer_socket.h — noticing that an HTTP client hung up while its non-streaming request
// is still generating.
//
// cpp-httplib 0.11 (Debian) gives a handler neither the connection's socket nor an
// is_connection_closed() probe, and a non-streaming reply must keep its status open until the
// result is known, so it cannot use a content provider either. The handler therefore finds its
// own connection's socket once (the accepted TCP socket whose local and peer addresses are the
// request's; the library keeps it open until the handler returns, so the descriptor cannot be
// reused meanwhile) and probes it while it waits.
#pragma once

#include <string>

namespace specdec::server {

// The open socket of this process connected from remote_addr:remote_port to local_port, or -1
// when none matches (an address the library reported differently, a closed connection).
// Cost: one fstat + getsockname + getpeername per open descriptor.
int find_connection_socket(const std::string& remote_addr, int remote_port, int local_port);

// True when the peer has closed or reset the connection (an orderly FIN reads as end of
// stream; bytes still unread, e.g. a pipelined request, mean it is alive). Never blocks.
bool peer_has_closed(int fd);

}  // namespace specdec::server
