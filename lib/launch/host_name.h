// The one rule for a host name that reaches an mpirun / mpiexec / ssh command line or
// MASTER_ADDR (hostfile entries, --master-addr, the host list of the MPI command): an
// RFC 1123 host name (labels of letters, digits and '-', neither starting nor ending with
// '-', 1-63 characters each, dots between them, 253 characters in all), a dotted-quad IPv4
// address or, where the syntax has room for one, an IPv6 address. Anything else -- a
// leading '-' that mpirun or ssh would read as an option, blanks, quotes, '_', '/', '@',
// empty labels -- is refused before it is used.
#pragma once

#include <string>

namespace ipex::launch {

constexpr size_t kMaxHostName = 253;  // characters in a whole name (RFC 1123)
constexpr size_t kMaxHostLabel = 63;  // characters between two dots

// "" when `host` follows the rule, else why not, as a phrase to follow the quoted name
// ("starts with '-', which mpirun and ssh would read as an option"). IPv6 literals
// (without brackets) pass only with `allow_ipv6`.
std::string host_name_problem(const std::string &host, bool allow_ipv6);

// `text` safe to quote in a message: at most 64 characters, control bytes as '?'.
std::string shown_host(const std::string &text);

// What a host may be, for the end of a message.
inline constexpr const char *kHostNameRule =
    "a host is a name of letters, digits and '-' (not first or last) between dots, or an IPv4 address";

}  // namespace ipex::launch
