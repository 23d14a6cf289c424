#include "broker/recovery/job_environment.hpp"

#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/slurm/job_options.hpp"
#include "common/parse_util.hpp"
#include "common/safe_path.hpp"

namespace shardnet::broker {


namespace {

bool name_ok(std::string_view n) {
    // A function bash exports (Lmod's and Environment Modules' module()): BASH_FUNC_NAME%%.
    if (n.size() > 12 && n.starts_with("BASH_FUNC_") && n.ends_with("%%")) {
        for (char c : n.substr(10, n.size() - 12))
            if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':')) return false;
        return true;
    }
    if (n.empty() || n.size() > 255 || !(std::isalpha(static_cast<unsigned char>(n[0])) || n[0] == '_')) return false;
    for (char c : n)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    return true;
}

}  // namespace

std::string read_environment(const boost::json::value &list, std::vector<std::string> &out) {
    const auto *a = list.if_array();
    if (!a) return "environment: expected an array of \"NAME=VALUE\" strings";
    if (a->size() > kEnvMaxEntries) return "environment: more than " + std::to_string(kEnvMaxEntries) + " entries";
    std::vector<std::string> env;
    std::set<std::string> names;
    std::size_t total = 0;
    for (std::size_t i = 0; i < a->size(); ++i) {
        const std::string at = "environment[" + std::to_string(i) + "]";
        const auto *s = (*a)[i].if_string();
        if (!s) return at + ": expected a \"NAME=VALUE\" string";
        const std::string e(*s);
        if (e.find('\0') != std::string::npos) return at + ": has a NUL byte";
        const auto eq = e.find('=');
        if (eq == std::string::npos || !name_ok(std::string_view(e).substr(0, eq)))
            return at + ": not NAME=VALUE with a name of [A-Za-z_][A-Za-z0-9_]* (or BASH_FUNC_NAME%%)";
        if (e.size() > kEnvMaxEntry) return at + " (" + e.substr(0, eq) + "): longer than " + std::to_string(kEnvMaxEntry) + " bytes";
        if (!names.insert(e.substr(0, eq)).second) return at + ": " + e.substr(0, eq) + " twice";
        total += e.size() + 1;
        if (total > kEnvMaxBytes) return "environment: more than " + std::to_string(kEnvMaxBytes) + " bytes";
        env.push_back(e);
    }
    out = std::move(env);
    return "";
}

bool environment_dropped(const std::string &name, const std::vector<std::string> &patterns) {
    if (step_option_variable(name)) return false;
    for (const auto &p : patterns) {
        if (!p.empty() && p.back() == '*') {
            if (name.compare(0, p.size() - 1, p, 0, p.size() - 1) == 0) return true;
        } else if (name == p) {
            return true;
        }
    }
    return false;
}

std::string private_dir(const std::string &database, std::string &err) {
    const std::string dir = std::filesystem::path(database).parent_path().string() + "/decisions";
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) { err = "cannot make " + dir + ": " + std::strerror(errno); return ""; }
    struct stat st;
    if (lstat(dir.c_str(), &st) != 0) { err = "cannot stat " + dir + ": " + std::strerror(errno); return ""; }
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        err = dir + " is not a directory of the broker's own with mode 0700 (a symlink, another owner or a wider mode)";
        return "";
    }
    return dir;
}

std::string write_environment_file(const std::string &dir, const std::string &run, const std::vector<std::string> &env, bool &existed) {
    existed = false;
    if (!is_safe_name(run)) return "not a run id";
    const std::string path = dir + "/" + run + ".environment", tmp = path + ".tmp";
    if (access(path.c_str(), F_OK) == 0) { existed = true; return ""; }
    std::string text;
    for (const auto &e : env) text += e, text += '\0';
    unlink(tmp.c_str());
    const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return "cannot write " + tmp + ": " + std::strerror(errno);
    const bool ok = write(fd, text.data(), text.size()) == ssize_t(text.size()) && fsync(fd) == 0;
    close(fd);
    // link(): the first attempt's environment stands, even against a racing second.
    if (!ok || (link(tmp.c_str(), path.c_str()) != 0 && errno != EEXIST)) {
        unlink(tmp.c_str());
        return "cannot write " + path + ": " + std::strerror(errno);
    }
    unlink(tmp.c_str());
    return "";
}

void forget_environment_file(const std::string &dir, const std::string &run) {
    if (is_safe_name(run)) unlink((dir + "/" + run + ".environment").c_str());
}

std::optional<std::string> read_environment_file(const std::string &dir, const std::string &run, std::string &err) {
    const std::string path = dir + "/" + run + ".environment";
    if (access(path.c_str(), F_OK) != 0) return std::nullopt;
    std::string text;
    if (err = read_small_file(path, kEnvMaxBytes + kEnvMaxEntries, text); !err.empty()) return std::nullopt;
    return text;
}

}  // namespace shardnet::broker
