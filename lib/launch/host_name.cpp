#include "launch/host_name.h"

#include <arpa/inet.h>

#include <vector>

namespace ipex::launch {
namespace {

constexpr size_t kShownChars = 64;

bool is_letter_or_digit(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool all_digits(const std::string &s) {
    if (s.empty()) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

std::vector<std::string> labels_of(const std::string &name) {
    std::vector<std::string> out;
    size_t pos = 0;
    for (;;) {
        const size_t dot = name.find('.', pos);
        out.push_back(name.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos));
        if (dot == std::string::npos) return out;
        pos = dot + 1;
    }
}

// Four decimal numbers 0-255 without leading zeros (inet_aton would read 010 as octal and
// 127.1 as 127.0.0.1; neither is what a reader of the hostfile sees).
bool is_dotted_quad(const std::vector<std::string> &labels) {
    if (labels.size() != 4) return false;
    for (const auto &l : labels) {
        if (!all_digits(l) || l.size() > 3 || (l.size() > 1 && l[0] == '0') || std::stoi(l) > 255) return false;
    }
    return true;
}

std::string char_text(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f) {
        static const char *const kHex = "0123456789abcdef";
        return std::string("byte 0x") + kHex[u >> 4] + kHex[u & 15];
    }
    return c == ' ' ? std::string("a blank") : "'" + std::string(1, c) + "'";
}

}  // namespace

std::string shown_host(const std::string &text) {
    std::string out;
    for (char c : text.substr(0, kShownChars))
        out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
    return text.size() > kShownChars ? out + "..." : out;
}

std::string host_name_problem(const std::string &host, bool allow_ipv6) {
    if (host.empty()) return "is empty";
    if (host.front() == '[' && host.back() == ']' && allow_ipv6)
        return "has brackets; write an IPv6 address without them";
    if (host.find(':') != std::string::npos) {
        if (!allow_ipv6) return "holds ':', which only an IPv6 address has; IPv6 addresses are not accepted here";
        in6_addr addr{};
        if (inet_pton(AF_INET6, host.c_str(), &addr) == 1) return "";
        return "is not an IPv6 address (it holds ':')";
    }
    if (host.front() == '-') return "starts with '-', which mpirun and ssh would read as an option";
    if (host.size() > kMaxHostName) return "is longer than " + std::to_string(kMaxHostName) + " characters";
    for (char c : host)
        if (!is_letter_or_digit(c) && c != '-' && c != '.')
            return "holds " + char_text(c) + "; a host name has only letters, digits, '-' and '.'";
    const auto labels = labels_of(host);
    for (const auto &l : labels) {
        if (l.empty()) return "has an empty label (a dot at either end, or two in a row)";
        if (l.size() > kMaxHostLabel)
            return "has a label longer than " + std::to_string(kMaxHostLabel) + " characters";
        if (l.front() == '-' || l.back() == '-') return "has a label starting or ending with '-' ('" + l + "')";
    }
    // A name whose last label is a number can only be an IPv4 address (RFC 3696 section 2).
    if (all_digits(labels.back()) && !is_dotted_quad(labels))
        return "is not an IPv4 address (four numbers 0-255 without leading zeros) and, ending in a number, "
               "not a host name either";
    return "";
}

}  // namespace ipex::launch
