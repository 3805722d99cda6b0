#include "launch/hostfile.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "base/errors.h"
#include "base/log.h"
#include "launch/host_name.h"

namespace ipex::launch {
namespace {

constexpr const char *kSyntax = "a line is HOST, HOST slots=N or HOST:N";

// Host names compare without case, as DNS compares them.
std::string lowered(std::string text) {
    for (char &c : text)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return text;
}

class LineError {
public:
    LineError(const std::string &source, int line) : where_(source + " line " + std::to_string(line) + ": ") {}
    [[noreturn]] void fail(const std::string &what) const { throw_bad_input("--hostfile " + where_ + what); }

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
        throw_bad_input("--hostfile " + source + ": larger than " + std::to_string(kMaxHostfileBytes >> 20) +
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
        if (host.name.find(':') != host.name.rfind(':') || host.name.front() == '[')
            err.fail("'" + shown_host(host.name) + "' looks like an IPv6 address, which a hostfile cannot hold (':' "
                     "separates the slots); give the host a name (/etc/hosts) and list that");
        if (const size_t colon = host.name.find(':'); colon != std::string::npos) {
            host.slots = parse_slots(host.name.substr(colon + 1), "'" + shown_host(host.name) + "'", err);
            host.name.erase(colon);
        }
        if (host.name.empty()) err.fail("no host name before ':'; " + std::string(kSyntax));
        if (const std::string why = host_name_problem(host.name, false); !why.empty())
            err.fail("host '" + shown_host(host.name) + "' " + why + "; " + kHostNameRule);
        for (size_t i = 1; i < fields.size(); ++i) {
            const std::string &f = fields[i];
            const size_t eq = f.find('=');
            const std::string key = f.substr(0, eq);
            if (eq == std::string::npos || (key != "slots" && key != "max_slots" && key != "max-slots"))
                err.fail("unknown field '" + shown_host(f) + "'; " + kSyntax);
            const int value = parse_slots(f.substr(eq + 1), shown_host(f), err);
            if (key == "slots") {
                if (host.slots != 0) err.fail("slots given twice for " + host.name);
                host.slots = value;
            }
        }
        if (auto it = first_line.find(lowered(host.name)); it != first_line.end())
            err.fail("host " + host.name + " is listed again (first on line " + std::to_string(it->second) +
                     "); list each host once, with slots=N for its ranks");
        if (hosts.size() == kMaxHostfileHosts)
            err.fail("more than " + std::to_string(kMaxHostfileHosts) + " hosts");
        first_line[lowered(host.name)] = lineno;
        hosts.push_back(std::move(host));
    }
    if (hosts.empty())
        throw_bad_input("--hostfile " + source + ": no hosts in the file (" + kSyntax + ")");
    return hosts;
}

std::vector<HostEntry> load_hostfile(const std::string &path) {
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
        throw_bad_input("--hostfile " + path + ": is a directory, not a file of hosts");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw_bad_input("--hostfile " + path + ": cannot read the file (" + std::strerror(errno) + ")");
    std::string text;
    char buf[65536];
    while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
        text.append(buf, static_cast<size_t>(in.gcount()));
        if (text.size() > kMaxHostfileBytes) break;
    }
    if (in.bad()) throw_bad_input("--hostfile " + path + ": read error (" + std::strerror(errno) + ")");
    return parse_hostfile(text, path);
}

}  // namespace ipex::launch
