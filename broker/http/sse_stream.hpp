#pragma once
// Server-Sent Events on one connection: the half of a session that an
// answer of the stream kind (ApiResponse::stream) turns it into. The
// response stays open and the service pushes events through an EventSink.
//
// A stream holds at most sse_buffer_bytes queued (beyond what the socket
// took); the backlog comes a page (a quarter of that) at a time, the next
// one asked for when the last is written, so a reader that does not keep up
// with live events is dropped, and one that reads slowly is not. A comment
// line every sse_keepalive_ms keeps proxies from timing an idle stream out
// and finds a vanished client.
//
// The session owns its SseStream (made only when it streams, so a plain
// connection carries none of this) and passes a shared pointer to itself to
// start(): every operation the stream begins holds it, as the session's own
// operations do. The session's end is the stream's `end` call: a graceful
// close (shut our side) or an abort (close the socket now).
#include "broker/http/api_message.hpp"
#include "broker/http/http_server.hpp"
#include "broker/util/log.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <functional>
#include <malloc.h>
#include <memory>
#include <string>

namespace shardnet::broker {

template <class Stream>
class SseStream {
public:
    enum class End { close, abort };

    // `end` ends the session (its socket); it is called at most once per
    // cause and may be called again harmlessly.
    SseStream(Stream &stream, const Limits &limits, std::function<void(End)> end)
        : stream_(stream), limits_(limits), end_(std::move(end)), keepalive_(stream.get_executor()) {}
    SseStream(const SseStream &) = delete;
    SseStream &operator=(const SseStream &) = delete;
    ~SseStream() { trim_after(peak_queued_); }

    // target: the request's (/v1/runs/{id}/events...), for the log line of
    // a dropped stream. keep: the session, held by every operation begun here.
    void start(const std::string &target, std::shared_ptr<void> keep, std::function<void(std::shared_ptr<EventSink>)> begin) {
        self_ = keep;
        run_ = run_of(target);
        auto sink = std::make_shared<EventSink>();
        sink->page_bytes = std::max<std::size_t>(1, limits_.sse_buffer_bytes / 4);
        // The sink may outlive the session: what it posts holds it, if it is still there.
        sink->push = [this, weak = self_](std::string msg) {
            if (auto held = weak.lock())
                boost::asio::post(stream_.get_executor(), [this, held, msg = std::move(msg)]() mutable { write(std::move(msg)); });
        };
        sink->more = [this, weak = self_](std::function<void()> next) {
            if (auto held = weak.lock())
                boost::asio::post(stream_.get_executor(), [this, held, next = std::move(next)]() mutable {
                    if (!sink_ || !sink_->open) return;
                    if (queue_.empty()) return next();
                    more_ = std::move(next);
                });
        };
        sink_ = sink;
        write("HTTP/1.1 200 OK\r\nServer: shardnet-broker\r\nContent-Type: text/event-stream\r\n"
              "Cache-Control: no-cache\r\nConnection: close\r\n\r\n");
        // Reading on tells us when the client goes away.
        stream_.async_read_some(boost::asio::buffer(scrap_), [this, keep](boost::beast::error_code, std::size_t) {
            sink_->open = false;
            keepalive_.cancel();
            end_(End::close);
        });
        tick();
        begin(sink);
    }

private:
    // The run of /v1/runs/{id}/events, made safe for a log line.
    static std::string run_of(const std::string &target) {
        std::string run = target.substr(0, target.find('?'));
        if (run.size() > 16) run = run.substr(9, run.size() - 16);
        for (char &c : run)
            if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
        return run;
    }

    // Freed memory goes back to the system once streams that held much of
    // it have gone (glibc keeps freed heap otherwise), at most every 100 ms.
    static void trim_after(std::size_t peak) {
        static std::atomic<long long> last{0};
        if (peak < (256u << 10)) return;
        const long long now =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
        long long seen = last.load(std::memory_order_relaxed);
        if (now - seen < 100 || !last.compare_exchange_strong(seen, now)) return;
        malloc_trim(0);
    }

    // The keep-alive tick. A reader that took nothing for kStallTicks
    // periods while we held events for it (a backlog page, say) is dropped.
    void tick() {
        keepalive_.expires_after(std::chrono::milliseconds(limits_.sse_keepalive_ms));
        keepalive_.async_wait([this, keep = self_.lock()](boost::beast::error_code ec) {
            if (ec || !sink_->open) return;
            if (queue_.empty()) write(": keep-alive\n\n");
            else if (writes_ == writes_at_tick_) {
                if (++stalls_ >= kStallTicks) return drop_slow(0, "no progress");
            } else stalls_ = 0;
            writes_at_tick_ = writes_;
            tick();
        });
    }

    void write(std::string msg) {
        if (!sink_ || !sink_->open) return;
        // One message is always taken (an event can be large); past that, a
        // full queue means the reader does not keep up.
        if (queued_ > 0 && queued_ + msg.size() > limits_.sse_buffer_bytes) return drop_slow(msg.size(), "buffer full");
        queued_ += msg.size();
        peak_queued_ = std::max(peak_queued_, queued_);
        queue_.push_back(std::move(msg));
        if (queue_.size() == 1) write_next();
    }

    void write_next() {
        boost::asio::async_write(stream_, boost::asio::buffer(queue_.front()), [this, keep = self_.lock()](boost::beast::error_code ec, std::size_t) {
            const std::string &done = queue_.front();
            if (!ec && done.compare(0, 4, "id: ") == 0) delivered_ = std::strtoll(done.c_str() + 4, nullptr, 10);
            queued_ -= done.size();
            ++writes_;
            queue_.pop_front();
            if (ec) {
                sink_->open = false;
                return end_(End::close);
            }
            if (!queue_.empty()) return write_next();
            if (more_) {   // the next page of the backlog
                auto next = std::move(more_);
                more_ = nullptr;
                next();
            }
        });
    }

    // A reader too slow for its stream: said once, its queue freed, its
    // socket closed. It resumes with Last-Event-ID (or ?after=).
    void drop_slow(std::size_t next, const char *why) {
        sink_->open = false;
        log_json("warn", "slow event stream dropped",
                 boost::json::object{{"run", run_}, {"last_event_id", delivered_}, {"why", why}, {"buffered_bytes", queued_ + next},
                                     {"limit", limits_.sse_buffer_bytes}, {"resume", "Last-Event-ID: " + std::to_string(delivered_)}});
        while (queue_.size() > 1) {   // the front is being written
            queued_ -= queue_.back().size();
            queue_.pop_back();
        }
        more_ = nullptr;
        keepalive_.cancel();
        end_(End::abort);
    }

    static constexpr int kStallTicks = 4;

    Stream &stream_;
    const Limits &limits_;
    std::function<void(End)> end_;
    // The session, not owned (it owns this): each operation begun here
    // holds it until the operation's end.
    std::weak_ptr<void> self_;
    std::shared_ptr<EventSink> sink_;
    std::deque<std::string> queue_;
    boost::asio::steady_timer keepalive_;
    char scrap_[512];
    // Bytes queued, the most ever, the last event id written, the run
    // followed, and the call for the next page of the backlog.
    std::size_t queued_ = 0, peak_queued_ = 0;
    long long delivered_ = 0;
    std::string run_;
    std::function<void()> more_;
    unsigned long long writes_ = 0, writes_at_tick_ = 0;   // messages written, and as of the last keep-alive tick
    int stalls_ = 0;
};

}  // namespace shardnet::broker
