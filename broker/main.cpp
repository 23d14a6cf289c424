// shardnet-broker: the control plane of one site. See shardnet-broker(8).
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <getopt.h>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "broker/util/thread_guard.hpp"
#include "broker/http/http_server.hpp"
#include "broker/service.hpp"
#include "broker/util/crash_report.hpp"
#include "broker/util/log.hpp"

using namespace shardnet::broker;
namespace asio = boost::asio;

namespace {

void log(const char *level, const std::string &msg, boost::json::object extra = {}) { log_json(level, msg.c_str(), std::move(extra)); }

bool load_config(const std::string &path, BrokerConfig &cfg, std::string &err) {
    std::ifstream f(path);
    if (!f) { err = "cannot read config '" + path + "'"; return false; }
    std::stringstream ss;
    ss << f.rdbuf();
    err = parse_broker_config(ss.str(), cfg);
    if (!err.empty()) err = path + ": " + err;
    return err.empty();
}

// Periodic work on the I/O context: the detector, and soft-state summaries.
void every(asio::steady_timer &t, std::chrono::milliseconds period, std::function<void()> fn) {
    t.expires_after(period);
    t.async_wait([&t, period, fn](boost::system::error_code ec) {
        if (ec) return;
        guarded("timer", fn);   // a tick that threw must not stop the next ones
        every(t, period, fn);
    });
}

// Past a deadline, the process ends whatever its threads are doing (a Slurm
// command or a peer request that does not return): said, then _Exit. The
// database is as a kill -9 leaves it, which it is made to survive.
class ExitAt {
public:
    ExitAt(std::chrono::steady_clock::time_point at, std::string what) : thread_([this, at, what = std::move(what)] {
        std::unique_lock<std::mutex> lock(mu_);
        if (at == std::chrono::steady_clock::time_point::max()) return cv_.wait(lock, [this] { return done_; });
        if (cv_.wait_until(lock, at, [this] { return done_; })) return;
        log("warn", "drain deadline passed: exiting now", {{"cut", what}});
        std::fflush(nullptr);
        std::_Exit(0);
    }) {}
    ~ExitAt() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            done_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }

private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool done_ = false;
    std::thread thread_;   // last: it starts once the rest is there
};

// An exception out of a handler leaves io_context::run(); the context can
// run on, so the thread does (the request whose handler threw is dropped
// with its connection).
void run_guarded(asio::io_context &ctx) {
    while (!guarded("I/O thread", [&ctx] { ctx.run(); })) {}
}

// The command line: an exit status to return now, or nothing (go on).
struct Args {
    std::string config_path, port_file;
    bool check_only = false;
};
std::optional<int> parse_args(int argc, char **argv, Args &args) {
    static const option longopts[] = {{"config", required_argument, nullptr, 'c'}, {"print-config", no_argument, nullptr, 'p'},
                                      {"check-config", no_argument, nullptr, 'k'}, {"port-file", required_argument, nullptr, 'P'},
                                      {"help", no_argument, nullptr, 'h'}, {nullptr, 0, nullptr, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "c:pkP:h", longopts, nullptr)) != -1) {
        switch (c) {
        case 'c': args.config_path = optarg; break;
        case 'p': std::fputs(config_template().c_str(), stdout); return 0;
        case 'k': args.check_only = true; break;
        case 'P': args.port_file = optarg; break;
        case 'h':
            std::puts("usage: shardnet-broker --config FILE [--check-config] [--port-file FILE] | --print-config");
            return 0;
        default: return 2;
        }
    }
    if (args.config_path.empty()) { std::fputs("shardnet-broker: --config FILE is required (see --print-config)\n", stderr); return 2; }
    return std::nullopt;
}

// What SIGTERM's drain is given: its seconds (a SIGHUP's config may change
// them) and, once it began, its deadline (time_point::max until then: wait
// as long as it takes).
struct DrainClock {
    int seconds = 10;
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// The I/O threads with the detector's and the summary's timers and the
// signals (SIGHUP reloads the config, SIGINT/SIGTERM drain), until the
// contexts stop. Timers and signals belong to the first context: gone
// before it is.
void serve(std::vector<std::unique_ptr<asio::io_context>> &ios, HttpServer &server, Service &service, const BrokerConfig &cfg,
           const std::string &config_path, DrainClock &drain) {
    asio::io_context &io = *ios.front();
    asio::steady_timer detector(io), summary(io);
    every(detector, std::chrono::milliseconds(250), [&] { service.tick(wall_now()); });
    every(summary, std::chrono::seconds(cfg.summary_seconds), [&] { service.summarise(); });

    asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
    asio::steady_timer drain_timer(io);
    std::chrono::steady_clock::time_point requests_deadline;
    // Lives as long as the loop: the drain timer calls it again.
    std::function<void()> wait_sessions = [&] {
        // Requests in flight are answered; idle keep-alive connections
        // are simply closed.
        const int busy = server.busy_sessions();
        if (busy > 0 && std::chrono::steady_clock::now() < requests_deadline) {
            drain_timer.expires_after(std::chrono::milliseconds(20));
            drain_timer.async_wait([&](boost::system::error_code) { wait_sessions(); });
            return;
        }
        // What goes with the contexts: requests not answered by now (a
        // reader that does not read, an answer the store still owes),
        // the event streams and the idle connections.
        log(busy > 0 ? "warn" : "info", "closing connections",
            {{"requests_cut", busy}, {"streams_cut", service.open_streams()}, {"connections", server.open_sessions()}});
        for (auto &x : ios) x->stop();
    };
    std::function<void(boost::system::error_code, int)> on_signal = [&](boost::system::error_code ec, int sig) {
        if (ec) return;
        if (sig == SIGHUP) {
            BrokerConfig fresh;
            std::string why;
            if (load_config(config_path, fresh, why)) {
                service.reload(fresh);
                drain.seconds = fresh.drain_seconds;
                log("info", "config reloaded", {{"tokens", fresh.tokens.size()}});
            } else {
                log("error", "config reload refused; keeping the running config", {{"reason", why}});
            }
            signals.async_wait(on_signal);
            return;
        }
        log("info", "draining", {{"open_connections", server.open_sessions()}, {"requests_in_flight", server.busy_sessions()},
                                 {"streams", service.open_streams()}, {"store_jobs", service.store_jobs()},
                                 {"drain_seconds", drain.seconds},
                                 // Connections shed at max_connections since the start, by what they waited for.
                                 {"shed_waiting_for_header", server.shed.load()}, {"shed_waiting_for_reader", server.shed_readers.load()},
                                 {"refused_at_max_connections", server.refused.load()}});
        server.stop();
        detector.cancel();
        summary.cancel();
        // Open requests finish, until drain_seconds less the store's part (a
        // quarter, at most 2 s); then the store's queue empties by the deadline.
        const auto now = std::chrono::steady_clock::now();
        const std::chrono::milliseconds whole(1000LL * drain.seconds);
        drain.deadline = now + whole;
        requests_deadline = drain.deadline - std::min<std::chrono::milliseconds>(whole / 4, std::chrono::seconds(2));
        wait_sessions();
    };
    signals.async_wait(on_signal);

    std::vector<std::thread> pool;
    std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
    for (std::size_t i = 1; i < ios.size(); ++i) {
        guards.push_back(asio::make_work_guard(*ios[i]));
        pool.emplace_back([&ctx = *ios[i]] { run_guarded(ctx); });
    }
    run_guarded(io);
    guards.clear();
    for (auto &t : pool) t.join();
}

}  // namespace

int main(int argc, char **argv) {
    report_crashes();
    Args args;
    if (auto status = parse_args(argc, argv, args)) return *status;
    BrokerConfig cfg;
    std::string err;
    if (!load_config(args.config_path, cfg, err)) { std::fprintf(stderr, "shardnet-broker: %s\n", err.c_str()); return 2; }
    if (args.check_only) { std::puts("config ok"); return 0; }

    DrainClock drain{cfg.drain_seconds};
    try {
        auto service = std::make_unique<Service>(cfg, std::make_unique<Store>(cfg.database, cfg.store_busy_ms));
        std::vector<std::unique_ptr<asio::io_context>> ios;
        // One thread per context, and a socket's I/O only ever on its own
        // context's thread (the acceptor hands each new socket over before
        // any I/O): the reactor's per-socket locks can go. Posting from
        // other threads (the store's answers, the drain) stays locked.
        for (int i = 0; i < cfg.threads; ++i)
            ios.push_back(std::make_unique<asio::io_context>(BOOST_ASIO_CONCURRENCY_HINT_UNSAFE_IO));
        HttpServer server(ios, cfg, *service);
        if (!args.port_file.empty()) std::ofstream(args.port_file) << server.port() << "\n";
        log("info", "listening", {{"address", cfg.listen_host}, {"port", server.port()}, {"tls", !cfg.plain_http},
                                  {"database", cfg.database}});
        server.start();
        serve(ios, server, *service, cfg, args.config_path, drain);
        // The service's threads end first (the store's queue emptied): an
        // answer one of them sends is posted to a context that must still
        // exist (stopped, it only queues it). Then the contexts go. All by
        // the drain's deadline: past it, what is left is said and cut.
        service->summarise();
        if (!service->drain(drain.deadline)) {
            log("warn", "drain deadline passed: exiting now",
                {{"cut", "the store's queue"}, {"store_jobs_cut", service->store_jobs()}, {"drain_seconds", drain.seconds}});
            std::fflush(nullptr);
            std::_Exit(0);
        }
        {
            ExitAt bound(drain.deadline, "the broker's threads (a Slurm command or a peer request in flight)");
            service.reset();
            server.shutdown();
        }
        log("info", "stopped");
    } catch (const std::exception &e) {
        std::fprintf(stderr, "shardnet-broker: %s\n", e.what());
        return 1;
    }
    return 0;
}
