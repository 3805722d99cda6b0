#include "launch/hostfile.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "launch/diagnostics.h"

namespace ipex::launch {
namespace {

constexpr const char *kSyntax = "a line is HOST, HOST slots=N or HOST:N";

bool is_host_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_';
}

// Text safe to quote in a message: at most 40 characters, control bytes as '?'.
std::string shown(const std::string &text) {
    std::string out;
    for (char c : text.substr(0, 40)) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
    return text.size() > 40 ? out + "..." : out;
}

class LineError {
public:
    LineError(const std::string &source, int line) : where_(source + " line " + std::to_string(line) + ": ") {}
    [[noreturn]] void fail(const std::string &what) const { fail_bad_input("--hostfile " + where_ + what); }

private:
    std::string where_;
};

int parse_slots(const std::string &text, const std::string &field, const LineError &err) {
    const std::string why = field + ": must be a whole number from 1 to " + std::to_string(kMaxHostSlots);
    if (text.empty() || text.size() > 5) err.fail(why);
    int value = 0;
    for (char c : text) {
        if (c < '0' || c > '9') err.fail(why);
        value = value * 10 + (c - '0');
    }
    if (value < 1 || value > kMaxHostSlots) err.fail(why);
    return value;
}

std::vector<std::string> fields_of(const std::string &line) {
    std::vector<std::string> out;
    std::istringstream in(line);
    for (std::string f; in >> f;) out.push_back(f);
    return out;
}

}  // namespace

std::vector<HostEntry> parse_hostfile(const std::string &text, const std::string &source) {
    if (text.size() > kMaxHostfileBytes)
        fail_bad_input("--hostfile " + source + ": larger than " + std::to_string(kMaxHostfileBytes >> 20) +
                       " MiB; a hostfile lists one host a line");
    std::vector<HostEntry> hosts;
    std::map<std::string, int> first_line;
    size_t pos = 0;
    int lineno = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        ++lineno;
        const LineError err(source, lineno);
        if (line.size() > kMaxHostfileLine)
            err.fail("longer than " + std::to_string(kMaxHostfileLine) + " characters; " + kSyntax);
        if (line.find('\0') != std::string::npos) err.fail("holds a NUL byte; not a text file");
        if (const size_t hash = line.find('#'); hash != std::string::npos) line.erase(hash);
        const auto fields = fields_of(line);
        if (fields.empty()) continue;

        HostEntry host;
        host.line = lineno;
        host.name = fields[0];
        if (const size_t colon = host.name.find(':'); colon != std::string::npos) {
            host.slots = parse_slots(host.name.substr(colon + 1), "'" + shown(host.name) + "'", err);
            host.name.erase(colon);
        }
        if (host.name.empty()) err.fail("no host name before ':'; " + std::string(kSyntax));
        if (host.name.size() > kMaxHostName)
            err.fail("host name longer than " + std::to_string(kMaxHostName) + " characters");
        for (char c : host.name)
            if (!is_host_char(c))
                err.fail("'" + shown(host.name) + "' is not a host name or IPv4 address (letters, digits, "
                         "'-', '.', '_')");
        for (size_t i = 1; i < fields.size(); ++i) {
            const std::string &f = fields[i];
            const size_t eq = f.find('=');
            const std::string key = f.substr(0, eq);
            if (eq == std::string::npos || (key != "slots" && key != "max_slots" && key != "max-slots"))
                err.fail("unknown field '" + shown(f) + "'; " + kSyntax);
            const int value = parse_slots(f.substr(eq + 1), shown(f), err);
            if (key == "slots") {
                if (host.slots != 0) err.fail("slots given twice for " + host.name);
                host.slots = value;
            }
        }
        if (auto it = first_line.find(host.name); it != first_line.end())
            err.fail("host " + host.name + " is listed again (first on line " + std::to_string(it->second) +
                     "); list each host once, with slots=N for its ranks");
        if (hosts.size() == kMaxHostfileHosts)
            err.fail("more than " + std::to_string(kMaxHostfileHosts) + " hosts");
        first_line[host.name] = lineno;
        hosts.push_back(std::move(host));
    }
    if (hosts.empty())
        fail_bad_input("--hostfile " + source + ": no hosts in the file (" + kSyntax + ")");
    return hosts;
}

std::vector<HostEntry> load_hostfile(const std::string &path) {
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        fail_bad_input("--hostfile " + path + ": is a directory, not a file of hosts");
    std::ifstream in(path, std::ios::binary);
    if (!in) fail_bad_input("--hostfile " + path + ": cannot read the file (" + std::strerror(errno) + ")");
    std::string text;
    char buf[65536];
    while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
        text.append(buf, static_cast<size_t>(in.gcount()));
        if (text.size() > kMaxHostfileBytes) break;
    }
    if (in.bad()) fail_bad_input("--hostfile " + path + ": read error (" + std::strerror(errno) + ")");
    return parse_hostfile(text, path);
}

}  // namespace ipex::launch
