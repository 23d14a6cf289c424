// The batch script's last lines of standard error in a FAILED event: whole
// in the evidence ("stderr_tail"), and one line of it in the cause, which
// one-line listings (shard events, the dashboard's table) show. The text is
// the job's (checked by read_heartbeat: UTF-8, no control characters but
// newline and tab); it is data in JSON, never markup.
#pragma once
#include <boost/json.hpp>
#include <string>
#include <string_view>

namespace shardnet::broker {

// The line a person looks for: the last one that is not srun's own report
// of its tasks' ends ("srun: error: beta2: task 1: Exited with exit code
// 3", which the cause says already), else the last one; trimmed, and cut
// to max bytes at a character's start.
inline std::string stderr_cause_line(std::string_view tail, std::size_t max = 200) {
    std::string_view pick, last;
    for (std::size_t end = tail.size(); end > 0 && pick.empty();) {
        const std::size_t nl = tail.rfind('\n', end - 1);
        const std::size_t from = nl == std::string_view::npos ? 0 : nl + 1;
        std::string_view line = tail.substr(from, end - from);
        while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
        while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
        if (!line.empty() && last.empty()) last = line;
        if (!line.empty() && line.rfind("srun: ", 0) != 0) pick = line;
        if (nl == std::string_view::npos) break;
        end = nl;
    }
    std::string out(pick.empty() ? last : pick);
    if (out.size() > max) {
        std::size_t cut = max;
        while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xc0) == 0x80) --cut;
        out = out.substr(0, cut) + "\xe2\x80\xa6";
    }
    return out;
}

// Adds a tail ("": none) to a FAILED event's cause and evidence.
inline void add_stderr_tail(std::string &cause, boost::json::object &evidence, const std::string &tail) {
    if (tail.empty()) return;
    evidence["stderr_tail"] = tail;
    if (const std::string line = stderr_cause_line(tail); !line.empty()) cause += "; stderr: " + line;
}

}  // namespace shardnet::broker
