#include "common/oci_runtime.hpp"

#include "common/find_program.hpp"

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace shardnet {

namespace {

std::string lower(std::string s) {
    for (char &c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

bool is_assignment(const std::string &w) {
    const auto eq = w.find('=');
    if (eq == std::string::npos || eq == 0) return false;
    if (!(std::isalpha(static_cast<unsigned char>(w[0])) || w[0] == '_')) return false;
    for (size_t i = 1; i < eq; ++i)
        if (!(std::isalnum(static_cast<unsigned char>(w[i])) || w[i] == '_')) return false;
    return true;
}

// Shell words of COMMAND, quotes removed; false when a construct the shell
// would expand or run (variables, substitutions, operators) is met first.
bool shell_words(const std::string &command, std::vector<std::string> &words, size_t want) {
    size_t i = 0;
    while (i < command.size() && words.size() < want) {
        while (i < command.size() && std::isspace(static_cast<unsigned char>(command[i]))) ++i;
        if (i >= command.size()) break;
        std::string w;
        while (i < command.size() && !std::isspace(static_cast<unsigned char>(command[i]))) {
            const char c = command[i];
            if (std::strchr("$`();|&<>", c)) return false;
            if (c == '\'' || c == '"') {
                const auto end = command.find(c, i + 1);
                if (end == std::string::npos) return false;
                w += command.substr(i + 1, end - i - 1);
                if (c == '"' && w.find_first_of("$`") != std::string::npos) return false;
                i = end + 1;
            } else if (c == '\\' && i + 1 < command.size()) {
                w += command[i + 1];
                i += 2;
            } else {
                w += c;
                ++i;
            }
        }
        words.push_back(w);
    }
    return true;
}

}  // namespace

std::string command_program(const std::string &command) {
    std::vector<std::string> words;
    if (!shell_words(command, words, 64)) return "";
    size_t i = 0;
    while (i < words.size() && is_assignment(words[i])) ++i;
    if (i < words.size() && words[i] == "exec") ++i;
    if (i < words.size() && (words[i] == "env" || words[i] == "/usr/bin/env")) {
        ++i;
        while (i < words.size() && (is_assignment(words[i]) || (!words[i].empty() && words[i][0] == '-'))) ++i;
    }
    return i < words.size() ? words[i] : "";
}

std::string parse_oci_conf(const std::string &text, std::map<std::string, std::string> &out) {
    // Lines, a trailing backslash joining the next.
    std::vector<std::string> lines;
    std::string cur;
    std::istringstream is(text);
    for (std::string l; std::getline(is, l);) {
        if (!l.empty() && l.back() == '\r') l.pop_back();
        if (!l.empty() && l.back() == '\\') { cur += l.substr(0, l.size() - 1); continue; }
        lines.push_back(cur + l);
        cur.clear();
    }
    if (!cur.empty()) lines.push_back(cur);
    for (size_t n = 0; n < lines.size(); ++n) {
        // The comment: from an unescaped '#', quotes or not.
        std::string line;
        const std::string &raw = lines[n];
        for (size_t i = 0; i < raw.size(); ++i) {
            if (raw[i] == '\\' && i + 1 < raw.size() && raw[i + 1] == '#') { line += '#'; ++i; continue; }
            if (raw[i] == '#') break;
            line += raw[i];
        }
        const std::string where = "line " + std::to_string(n + 1) + ": ";
        size_t i = 0;
        for (;;) {
            while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
            if (i >= line.size()) break;
            // Slurm's pattern: KEY (letters, digits, '_', '.'), blanks, '=', blanks, VALUE.
            size_t k = i;
            while (k < line.size() && (std::isalnum(static_cast<unsigned char>(line[k])) || line[k] == '_' || line[k] == '.')) ++k;
            size_t eq = k;
            while (eq < line.size() && (line[eq] == ' ' || line[eq] == '\t')) ++eq;
            if (k == i || eq >= line.size() || line[eq] != '=') {
                const size_t blank = line.find_first_of(" \t", i);
                return where + "'" + line.substr(i, blank == std::string::npos ? std::string::npos : blank - i) + "' is no KEY=VALUE";
            }
            const std::string key = lower(line.substr(i, k - i));
            std::string value;
            i = eq + 1;
            while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
            if (i < line.size() && line[i] == '"') {
                const size_t end = line.find('"', i + 1);
                if (end == std::string::npos) return where + key + ": a quote that does not end";
                value = line.substr(i + 1, end - i - 1);
                i = end + 1;
            } else {
                const size_t end = line.find_first_of(" \t", i);
                value = line.substr(i, end == std::string::npos ? std::string::npos : end - i);
                i = end == std::string::npos ? line.size() : end;
            }
            out[key] = value;   // given twice: the last one, as Slurm takes it
        }
    }
    return "";
}

OciSupport discover_oci(const std::string &slurm_conf, const std::string &path) {
    OciSupport o;
    const auto slash = slurm_conf.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : slurm_conf.substr(0, slash == 0 ? 1 : slash);
    const std::string conf = (dir == "/" ? "" : dir) + "/oci.conf";
    const int fd = ::open(conf.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) o.why = "no oci.conf beside " + slurm_conf;
        else o.known = false, o.why = conf + ": " + std::strerror(errno);
        return o;
    }
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0 && text.size() < (1u << 20);) text.append(buf, size_t(n));
    ::close(fd);
    o.oci_conf = conf;
    std::map<std::string, std::string> kv;
    if (auto err = parse_oci_conf(text, kv); !err.empty()) {
        o.why = conf + ": " + err + " (Slurm refuses the file)";
        return o;
    }
    // Slurm's two forms: RunTimeRun, or RunTimeCreate with RunTimeStart;
    // either with RunTimeQuery, RunTimeKill and RunTimeDelete.
    auto has = [&](const char *k) { return kv.count(k) > 0 && !kv.at(k).empty(); };
    const bool run = has("runtimerun"), create = has("runtimecreate"), start = has("runtimestart");
    std::string missing;
    for (const char *k : {"runtimequery", "runtimekill", "runtimedelete"})
        if (!has(k)) missing += std::string(missing.empty() ? "" : ", ") + k;
    if (!missing.empty() || run == (create || start) || (!run && !(create && start))) {
        o.why = conf + ": needs RunTimeRun, or RunTimeCreate and RunTimeStart (not both forms), with RunTimeQuery, RunTimeKill "
                       "and RunTimeDelete" + (missing.empty() ? std::string() : " (missing: " + missing + ")");
        return o;
    }
    const char *which = run ? "RunTimeRun" : "RunTimeCreate";
    const std::string word = command_program(kv.at(run ? "runtimerun" : "runtimecreate"));
    if (word.empty()) {   // a shell construct decides the program: not judged
        o.ready = true;
        return o;
    }
    const std::string program = word.find('/') == std::string::npos ? find_program(word, path) : word;
    if (program.empty() || !executable_file(program)) {
        o.why = conf + "'s " + which + " starts " + word + ", which is not an executable file";
        return o;
    }
    o.runtime = program;
    o.ready = true;
    return o;
}

}  // namespace shardnet
