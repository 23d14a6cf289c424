#include "hwloc-probe/oci_runtime.hpp"

#include <cctype>
#include <fstream>
#include <sstream>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

namespace shardnet::probe {

namespace {

std::string trim(const std::string &s) {
    size_t a = 0, b = s.size();
    while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
    while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
    return s.substr(a, b - a);
}

bool executable(const std::string &p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

// The command's program: its first word, found on PATH when it has no '/'.
std::string program_of(const std::string &command, const std::string &path, std::string &word) {
    std::istringstream is(command);
    is >> word;
    if (word.empty() || word.find('/') != std::string::npos) return word;
    std::istringstream dirs(path);
    for (std::string d; std::getline(dirs, d, ':');)
        if (!d.empty() && executable(d + "/" + word)) return d + "/" + word;
    return "";
}

}  // namespace

bool oci_conf_line(const std::string &raw, std::string &key, std::string &value) {
    // Slurm's parser: KEY=VALUE, keys in any case, '#' starts a comment
    // outside quotes, a value may be double-quoted.
    std::string line;
    bool quoted = false;
    for (char c : raw) {
        if (c == '"') quoted = !quoted;
        if (c == '#' && !quoted) break;
        line += c;
    }
    line = trim(line);
    const auto eq = line.find('=');
    if (line.empty() || eq == std::string::npos) return false;
    key = trim(line.substr(0, eq));
    value = trim(line.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    return !key.empty();
}

OciSupport discover_oci(const std::string &slurm_conf, const std::string &path) {
    OciSupport o;
    const auto slash = slurm_conf.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slurm_conf.substr(0, slash == 0 ? 1 : slash);
    const std::string conf = (dir == "/" ? "" : dir) + "/oci.conf";
    std::ifstream f(conf);
    if (!f) {
        o.why = "no oci.conf beside " + slurm_conf;
        return o;
    }
    o.oci_conf = conf;
    std::string run, create;
    for (std::string line, key, value; std::getline(f, line);) {
        if (!oci_conf_line(line, key, value)) continue;
        if (::strcasecmp(key.c_str(), "RunTimeRun") == 0) run = value;
        else if (::strcasecmp(key.c_str(), "RunTimeCreate") == 0) create = value;
    }
    const char *which = !run.empty() ? "RunTimeRun" : "RunTimeCreate";
    const std::string command = !run.empty() ? run : create;
    if (command.empty()) {
        o.why = conf + " has neither RunTimeRun nor RunTimeCreate";
        return o;
    }
    std::string word;
    const std::string program = program_of(command, path, word);
    if (program.empty() || !executable(program)) {
        o.why = conf + "'s " + which + " starts " + word + ", which is not an executable file";
        return o;
    }
    o.runtime = program;
    o.ready = true;
    return o;
}

}  // namespace shardnet::probe
