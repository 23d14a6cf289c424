// shardnet-agent: one per node per step, started by the plugin in
// slurmstepd and running as the job user. Sends progress-aware heartbeats
// to the broker, the tasks' exits, and the signal before the time limit.
// Whatever the broker does (down, slow, refusing, silent), the agent only
// loses heartbeats; it never holds up the step.
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <algorithm>
#include <boost/json.hpp>
#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <vector>
#include <poll.h>
#include <map>
#include <string>
#include <unistd.h>

#include "common/agent_protocol.hpp"
#include "common/checkpoint_layout.hpp"
#include "spank/heartbeat.hpp"
#include "common/http_client.hpp"
#include "common/parse_util.hpp"
#include "common/safe_path.hpp"
#include "spank/slurm_query.hpp"
#include "spank/signal_caught.hpp"
#include "spank/stderr_tail.hpp"

using namespace shardnet;

namespace {

// Whether another process traces this one (TracerPid in /proc/self/status).
bool being_traced() {
    // A /proc file says size 0: read until its end.
    const int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    std::string status;
    char buf[4096];
    for (ssize_t n; status.size() < (1u << 16) && (n = ::read(fd, buf, sizeof buf)) > 0;) status.append(buf, std::size_t(n));
    ::close(fd);
    const auto at = status.find("\nTracerPid:");
    return at != std::string::npos && std::atol(status.c_str() + at + 11) != 0;
}

// A report to send again at the next heartbeat: the broker away, or busy
// (429: the job's requests in flight are many, limits.requests_per_token).
bool again_later(const HttpResponse &res) { return res.status == 0 || res.status == 429 || res.status >= 500; }

// The reason in a broker's error answer ({"error":{"message":...}}), on one
// line and bounded, for the log: a refusal names what was wrong.
std::string broker_says(const std::string &body) {
    const auto k = body.find("\"message\":\"");
    if (k == std::string::npos) return "";
    std::string msg;
    for (std::size_t i = k + 11; i < body.size() && body[i] != '"' && msg.size() < 300; ++i) {
        if (body[i] == '\\' && i + 1 < body.size()) ++i;
        msg += (static_cast<unsigned char>(body[i]) < 0x20) ? ' ' : body[i];
    }
    return msg.empty() ? "" : ": " + msg;
}

double wall_now() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

using Clock = std::chrono::steady_clock;

// Lines from the plugin, read without blocking.
class LineReader {
public:
    explicit LineReader(int fd) : fd_(fd) {}
    // Reads what is there; false at end of file or error.
    bool fill() {
        char buf[4096];
        ssize_t n = ::read(fd_, buf, sizeof buf);
        if (n > 0) { buf_.append(buf, size_t(n)); return true; }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
        eof_ = true;
        return false;
    }
    bool next(std::string &line) {
        auto nl = buf_.find('\n');
        if (nl == std::string::npos) return false;
        line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return true;
    }
    bool eof() const { return eof_; }
    int fd() const { return fd_; }
private:
    int fd_;
    std::string buf_;
    bool eof_ = false;
};

class Agent {
public:
    Agent(AgentConfig cfg, LineReader &in) : cfg_(std::move(cfg)), in_(in) {
        for (const auto &r : cfg_.ranks) ranks_.push_back(RankState{r.rank, r.local_rank, 0, {}, {}, 0, false, {}, {}, -1, 0, {}});
    }

    int run() {
        apply_events();
        auto next = Clock::now();
        auto next_limit_check = Clock::now();
        while (!in_.eof()) {
            auto now = Clock::now();
            if (now >= next) {
                heartbeat("running", cfg_.timeout_ms);
                next = Clock::now() + std::chrono::seconds(cfg_.interval);
                urgent_ = false;
                learn_stderr_path();
            }
            const bool limit_due = end_time_ > 0 && std::time(nullptr) >= end_time_ - cfg_.prelimit_secs;
            if (cfg_.prelimit_signal && !prelimit_sent_ && (limit_due || Clock::now() >= next_limit_check)) {
                check_time_limit();
                // Right after the start slurmctld may not have the end time yet.
                next_limit_check = Clock::now() + std::chrono::seconds(end_time_ ? 30 : 2);
                if (urgent_) next = Clock::now();   // the signal went: the broker hears of it now, not an interval later
            }
            auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
            if (cfg_.prelimit_signal && !prelimit_sent_ && end_time_ > 0) {
                long long to_signal = (end_time_ - cfg_.prelimit_secs - std::time(nullptr)) * 1000LL;
                wait = std::min<long long>(wait, std::max<long long>(to_signal, 0));
            }
            pollfd p{in_.fd(), POLLIN, 0};
            ::poll(&p, 1, int(std::clamp<long long>(wait, 0, 60000)));
            if (p.revents) read_events();
            if (urgent_) next = Clock::now();  // a task failed: tell the broker now
        }
        // End of step. Only a broker that answered gets the final report,
        // and only within a short deadline: the step must not wait on us.
        if (broker_ok_) heartbeat("ended", std::min(cfg_.timeout_ms, 1000));
        return 0;
    }

    // The batch step's standard error, as Slurm names it: asked once the
    // first heartbeat is out (and again at the next two if slurmctld did
    // not answer), never at the step's end, where the final report has
    // only exit_wait_ms to leave.
    void learn_stderr_path() {
        if (cfg_.step != "batch" || !stderr_path_.empty() || stderr_asks_ >= 3 || cfg_.job == 0) return;
        ++stderr_asks_;
        stderr_path_ = job_stderr_path(cfg_.job);
    }

    // The tail of the batch script's standard error when it ended non-zero
    // or by a signal: the first thing a user reads of a failure. Ranks that
    // srun started write there too (srun forwards their output); a step's
    // own srun -e FILE is not read.
    std::string stderr_tail() {
        if (cfg_.step != "batch" || stderr_path_.empty() || ranks_.empty() || !ranks_[0].wait_status || *ranks_[0].wait_status == 0)
            return "";
        std::string err;
        std::string tail = read_stderr_tail(stderr_path_, err);
        if (!err.empty()) log("the batch script's standard error is not read: " + err);
        return tail;
    }

private:
    void read_events() {
        in_.fill();
        apply_events();
    }

    // Lines may already wait in the buffer, read along with the config.
    void apply_events() {
        std::string line;
        while (in_.next(line)) {
            auto ev = parse_agent_event(line);
            if (!ev) { log("ignoring a malformed line from the plugin"); continue; }
            RankState *r = find(ev->rank);
            if (!r) continue;
            if (ev->kind == AgentEvent::pid) r->pid = ev->value;
            else {
                r->wait_status = ev->value;
                // Which rank failed first: the broker names it when it
                // tells a program's error from a node's death.
                r->exit_time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
                if (ev->value != 0) urgent_ = true;
            }
        }
    }

    // A rank that finished a checkpoint ("STEP committed NAME"): its
    // manifest goes to the broker with this agent's token (the trainer holds
    // none). The commit that completes the set seals it at the broker; the
    // SEALED marker follows the broker's list (sync_seals), for
    // --shardnet-resume=latest.
    // Every checkpoint up to the one the trainer names is committed, in
    // order: all ranks must commit the same names for a seal, whichever
    // each agent's tick happened to see.
    // Only checkpoints written since this agent started: an attempt that
    // resumed does not commit its predecessor's again.
    static std::vector<std::string> finished_since(const std::string &ckpt_dir, unsigned rank, const std::string &after,
                                                   const std::string &upto, time_t since) {
        std::vector<std::string> names;
        int dfd = ::open(ckpt_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0) return names;
        DIR *d = ::fdopendir(dfd);
        if (!d) { ::close(dfd); return names; }
        const std::string manifest = "/rank-" + std::to_string(rank) + ".manifest";
        while (dirent *e = ::readdir(d)) {
            std::string n = e->d_name;
            struct stat st;
            if (n.rfind("checkpoint-", 0) == 0 && n > after && n <= upto &&
                ::fstatat(dfd, (n + manifest).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
                st.st_mtime >= since)
                names.push_back(n);
        }
        ::closedir(d);
        std::sort(names.begin(), names.end());
        if (names.size() > 64) names.erase(names.begin(), names.end() - 64);  // a long outage: the newest are what matter
        return names;
    }

    void commit_checkpoints(int timeout_ms) {
        if (cfg_.ckpt_dir.empty()) return;
        for (auto &r : ranks_) {
            if (r.committed.empty() || r.committed == r.reported) continue;
            auto pending = finished_since(cfg_.ckpt_dir, r.rank, r.reported, r.committed, started_ - 1);
            if (pending.empty()) pending.push_back(r.committed);
            for (const auto &name : pending)
                if (!commit_one(r, name, timeout_ms)) return;
            r.reported = r.committed;
        }
    }

    // false: the broker is away (try again at the next heartbeat).
    bool commit_one(RankState &r, const std::string &name, int timeout_ms) {
        const std::string dir = cfg_.ckpt_dir + "/" + name;
        std::string text;
        std::string err = read_small_file(dir + "/rank-" + std::to_string(r.rank) + ".manifest", kMaxManifestBytes, text);
        HttpRequest req;
        if (err.empty()) req.body = commit_json(text, cfg_.attempt, r.rank, cfg_.world, err, name == r.committed ? r.write_seconds : -1);
        if (!err.empty()) {
            log("checkpoint " + name + " of rank " + std::to_string(r.rank) + " not committed: " + err);
            return true;
        }
        req.url = cfg_.url + "/v1/runs/" + cfg_.run + "/checkpoints/" + name + "/commit";
        req.bearer = cfg_.token;
        req.ca_file = cfg_.ca_file;
        req.timeout_ms = timeout_ms;
        auto res = client_.send(req);
        if (again_later(res)) return false;
        r.reported = name;
        if (!res.ok()) { log("checkpoint " + name + " refused: HTTP " + std::to_string(res.status) + " " + res.body); return true; }
        // Sealed or not, the broker's list says which; on every node that
        // holds the checkpoint, its marker follows the list.
        unsealed_[name] = 0;
        return true;
    }

    // Checkpoints this agent committed that the broker has not listed as
    // sealed yet: asked at each heartbeat until it does (a set whose other
    // ranks never commit is given up after kSealTries).
    static constexpr int kSealTries = 30;
    void sync_seals(int timeout_ms) {
        if (unsealed_.empty() || cfg_.ckpt_dir.empty()) return;
        HttpRequest req;
        req.method = "GET";
        // Its unsealed ones are among the newest (each is given up after
        // kSealTries heartbeats; a page holds 1000 seals, more than a run
        // seals between two heartbeats): not the run's whole history each time.
        req.url = cfg_.url + "/v1/runs/" + cfg_.run + "/checkpoints?newest=1000";
        req.bearer = cfg_.token;
        req.ca_file = cfg_.ca_file;
        req.timeout_ms = timeout_ms;
        auto res = client_.send(req);
        if (!res.ok()) return;   // the broker is away: asked again next time
        std::string err;
        for (const auto &c : sealed_checkpoints(res.body, err)) {
            auto it = unsealed_.find(c.name);
            if (it == unsealed_.end()) continue;
            if (std::string why = mark_sealed(cfg_.ckpt_dir, c.name, c.marker); !why.empty()) log("SEALED marker not written: " + why);
            unsealed_.erase(it);
        }
        if (!err.empty()) log(err);
        for (auto it = unsealed_.begin(); it != unsealed_.end();)
            if (++it->second >= kSealTries) {
                log("checkpoint " + it->first + " not sealed by the broker after " + std::to_string(kSealTries) +
                    " heartbeats (a rank did not commit it); no SEALED marker");
                it = unsealed_.erase(it);
            } else {
                ++it;
            }
    }

    RankState *find(unsigned rank) {
        for (auto &r : ranks_)
            if (r.rank == rank) return &r;
        return nullptr;
    }

    void heartbeat(const char *state, int timeout_ms) {
        for (auto &r : ranks_) {
            double mt = 0, took = -1;
            bool ckpt = false;
            std::string committed;
            auto step = read_progress(cfg_.progress_dir + "/rank-" + std::to_string(r.rank), &mt, &ckpt, &committed, &took);
            if (step) { r.step = step; r.progress_time = mt; r.checkpointing = ckpt; }
            if (ckpt && r.ckpt_began == 0) r.ckpt_began = mt;
            if (!committed.empty() && committed != r.committed) {
                // The write time: as the trainer timed it, else from the
                // progress file's times as this agent saw them.
                r.write_seconds = took >= 0 ? took : r.ckpt_began > 0 && mt >= r.ckpt_began ? mt - r.ckpt_began : -1;
                r.ckpt_began = 0;
                r.committed = committed;
            }
        }
        HttpRequest req;
        req.url = cfg_.url + "/v1/heartbeats";
        req.bearer = cfg_.token;
        req.ca_file = cfg_.ca_file;
        req.timeout_ms = timeout_ms;
        req.body = heartbeat_json(cfg_, ranks_, state, ++seq_, wall_now(), prelimit_sent_, policy_version_,
                                  std::strcmp(state, "ended") == 0 ? stderr_tail() : "");
        // The step's end cuts a request short: read events while we wait.
        auto res = client_.send(req, in_.eof() ? -1 : in_.fd(), [this] {
            read_events();
            return !in_.eof();
        });
        if (res.cancelled) return;
        bool ok = res.ok();
        if (ok != broker_ok_ || first_) {
            if (!ok) log("broker " + cfg_.url + " " +
                         (res.status ? "answered HTTP " + std::to_string(res.status) + broker_says(res.body) : "unreachable: " + res.error));
            else if (!first_) log("broker " + cfg_.url + " answers again");
        }
        if (first_) {  // the plugin's verdict: wait for a final report or not
            std::string verdict = ok ? "O\n" : "F" + (res.status ? "HTTP " + std::to_string(res.status) + broker_says(res.body) : res.error) + "\n";
            (void)!::write(1, verdict.data(), verdict.size());
            ::close(1);
        }
        first_ = false;
        broker_ok_ = ok;
        if (ok) {
            if (res.status == 200 && cfg_.ckpt_auto()) take_policy(res.body);
            report_ranks(timeout_ms);
            report_environment(timeout_ms);
            commit_checkpoints(timeout_ms);
            sync_seals(timeout_ms);
        }
    }

    // Once per step: which ranks run on this node and with what, for the
    // attempt's receipt. A rank is known when its trainer reported its
    // environment (rank-N.env, written before its first progress line), or
    // reports progress without one, or ended; the report waits for all of
    // this node's ranks. A refusal is logged, not retried. A batch script
    // that is no trainer (it reports nothing and runs srun steps, whose
    // agents report their ranks) is not reported.
    void report_ranks(int timeout_ms) {
        if (ranks_reported_) return;
        bool trainer = false;
        for (auto &r : ranks_) {
            if (!r.environment.empty()) { trainer = trainer || r.environment != "null" || r.step; continue; }
            std::string err;
            auto env = read_environment_file(cfg_.progress_dir + "/rank-" + std::to_string(r.rank) + ".env", err);
            if (!err.empty()) log("rank " + std::to_string(r.rank) + "'s environment report is ignored: " + err);
            if (env) r.environment = *env;
            else if (r.step || r.wait_status) r.environment = "null";
            else return;   // not started yet: asked again at the next heartbeat
            trainer = trainer || env || r.step;
        }
        if (cfg_.step == "batch" && !trainer) { ranks_reported_ = true; return; }
        HttpRequest req;
        req.url = cfg_.url + "/v1/runs/" + cfg_.run + "/ranks";
        req.bearer = cfg_.token;
        req.ca_file = cfg_.ca_file;
        req.timeout_ms = timeout_ms;
        req.body = ranks_report_json(cfg_, ranks_);
        auto res = client_.send(req);
        if (again_later(res)) return;
        if (!res.ok()) log("the ranks' report was refused: HTTP " + std::to_string(res.status) + broker_says(res.body));
        ranks_reported_ = true;
    }

    // Once, from the batch step: the job's environment as the plugin saved
    // it (job.environment in the progress dir), for the broker to replay
    // into a later attempt. Sent whole; a refusal is logged, not retried.
    void report_environment(int timeout_ms) {
        if (env_reported_ || cfg_.step != "batch") return;
        std::string text;
        const std::string path = cfg_.progress_dir + "/job.environment";
        if (::access(path.c_str(), F_OK) != 0 || !read_small_file(path, 800u << 10, text).empty()) { env_reported_ = true; return; }
        boost::json::array list;
        std::size_t pos = 0, skipped = 0;
        while (pos < text.size()) {
            const auto end = text.find('\0', pos);
            if (end == std::string::npos) break;
            const std::string_view entry = std::string_view(text).substr(pos, end - pos);
            // JSON carries text: an entry that is not UTF-8 is left out (and counted).
            if (is_valid_utf8(entry)) list.emplace_back(entry);
            else ++skipped;
            pos = end + 1;
        }
        HttpRequest req;
        req.url = cfg_.url + "/v1/runs/" + cfg_.run + "/environment";
        req.bearer = cfg_.token;
        req.ca_file = cfg_.ca_file;
        req.timeout_ms = timeout_ms;
        req.body = boost::json::serialize(boost::json::object{{"attempt", cfg_.attempt}, {"environment", std::move(list)}});
        auto res = client_.send(req);
        if (again_later(res)) return;
        if (!res.ok()) log("the job's environment was refused: HTTP " + std::to_string(res.status) + broker_says(res.body));
        if (skipped) log(std::to_string(skipped) + " variable(s) of the job's environment are not UTF-8: a requeued attempt will not get them");
        env_reported_ = true;
    }

    // A new checkpoint policy from the broker: into the file the trainer's
    // library reads (SHARDNET_CKPT_POLICY), atomically (a temporary name in
    // the same directory, then rename).
    void take_policy(const std::string &body) {
        std::string err;
        auto p = parse_policy_answer(body, err);
        if (!p) { log(err); return; }
        if (p->version == policy_version_) return;
        const std::string path = cfg_.progress_dir + "/ckpt-policy", tmp = path + ".tmp";
        const std::string text = policy_file_text(*p);
        ::unlink(tmp.c_str());
        int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        bool written = fd >= 0 && ::write(fd, text.data(), text.size()) == ssize_t(text.size());
        if (fd >= 0) ::close(fd);
        if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) {
            log("checkpoint policy not written to " + path + ": " + std::strerror(errno));
            ::unlink(tmp.c_str());
            return;
        }
        log("checkpoint policy v" + std::to_string(p->version) + " from the broker: every " + std::to_string(p->every_steps) + " steps");
        policy_version_ = p->version;
    }

    void check_time_limit() {
        // Limits can change (scontrol update): ask again on every periodic check.
        if (std::time(nullptr) < end_time_ - cfg_.prelimit_secs || end_time_ == 0) {
            std::time_t was = end_time_;
            end_time_ = job_end_time(cfg_.job);
            if (end_time_ != was && end_time_ > 0)
                log("time limit ends in " + std::to_string(end_time_ - std::time(nullptr)) + " s; signal " +
                    std::to_string(cfg_.prelimit_signal) + " goes " + std::to_string(cfg_.prelimit_secs) + " s before");
        }
        if (end_time_ == 0 || std::time(nullptr) < end_time_ - cfg_.prelimit_secs) return;
        int sent = 0;
        const int sig = cfg_.prelimit_signal;
        for (const auto &r : ranks_) {
            if (r.pid <= 0 || r.wait_status) continue;
            // The batch step's one "rank" is the batch script: a shell the
            // signal would end (its default action), job and all. It gets
            // the signal only when it catches it (a trainer exec'd by the
            // script, with the Python library's handler; a trap).
            if (cfg_.step == "batch" && !catches_signal(r.pid, cfg_.prelimit_signal)) continue;
            if (::kill(r.pid, cfg_.prelimit_signal) == 0) ++sent;
            else log("cannot signal rank " + std::to_string(r.rank) + " (pid " + std::to_string(r.pid) + "): " + std::strerror(errno));
        }
        prelimit_sent_ = sent > 0 || cfg_.step != "batch";   // a batch script that does not catch it was not signalled
        if (cfg_.step == "batch" && sent == 0) {
            cfg_.prelimit_signal = 0;   // asked once: nothing here takes it
            log("the batch script does not catch signal " + std::to_string(sig) + ": not sent (srun steps' ranks get it)");
            return;
        }
        log("sent signal " + std::to_string(cfg_.prelimit_signal) + " to " + std::to_string(sent) + " task(s), " +
            std::to_string(cfg_.prelimit_secs) + " s before the time limit");
        urgent_ = true;
    }

    void log(const std::string &msg) {
        // Our lines reach slurmd's log only when the step ends: stamp them.
        char stamp[32];
        std::time_t t = std::time(nullptr);
        std::strftime(stamp, sizeof stamp, "%H:%M:%S ", std::localtime(&t));
        std::string line = stamp + std::string("node ") + cfg_.node + " job " + std::to_string(cfg_.job) + "." + cfg_.step + ": " + msg + "\n";
        (void)!::write(2, line.data(), line.size());
    }

    AgentConfig cfg_;
    LineReader &in_;
    std::vector<RankState> ranks_;
    std::map<std::string, int> unsealed_;   // checkpoint -> heartbeats asked
    HttpClient client_;
    unsigned long long seq_ = 0;
    long long policy_version_ = 0;   // the checkpoint policy written for the trainer (0: none)
    bool broker_ok_ = false;
    bool ranks_reported_ = false;
    bool env_reported_ = false;
    time_t started_ = std::time(nullptr);
    bool first_ = true;
    bool urgent_ = false;
    bool prelimit_sent_ = false;
    std::time_t end_time_ = 0;
    std::string stderr_path_;   // the batch script's standard error ("": not known)
    int stderr_asks_ = 0;
};

}  // namespace

int main() {
    // The token comes next, on stdin: a task of the same user must not read
    // it from this process's memory (/proc/PID/mem, ptrace) or a core dump.
    // Not dumpable makes /proc/PID/* root's and refuses the user's ptrace.
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    // One that attached before that (between exec and here) is still
    // attached: then the token is not read at all.
    if (being_traced()) {
        std::fprintf(stderr, "shardnet-agent: traced by another process before it took its token; not started\n");
        return 2;
    }
    std::signal(SIGPIPE, SIG_IGN);
    ::fcntl(0, F_SETFL, ::fcntl(0, F_GETFL) | O_NONBLOCK);
    ::fcntl(2, F_SETFL, ::fcntl(2, F_GETFL) | O_NONBLOCK);

    LineReader in(0);
    AgentConfigParser parser;
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    std::string line;
    while (!parser.done()) {
        while (!parser.done() && in.next(line)) {
            if (auto err = parser.feed(line); !err.empty()) {
                std::fprintf(stderr, "config from the plugin rejected: %s\n", err.c_str());
                return 2;
            }
        }
        if (parser.done()) break;
        if (in.eof() || Clock::now() > deadline) {
            std::fprintf(stderr, "no complete config from the plugin\n");
            return 2;
        }
        pollfd p{0, POLLIN, 0};
        ::poll(&p, 1, 100);
        in.fill();
    }
    AgentConfig cfg = std::move(parser.config());
    if (cfg.node.empty()) cfg.node = nth_host(cfg.nodelist, cfg.nodeid);
    if (cfg.node.empty()) {
        char host[256] = {};
        ::gethostname(host, sizeof host - 1);
        cfg.node = host;
    }
    return Agent(std::move(cfg), in).run();
}
