// POST /v1/runs/RUN/environment: the batch step's agent sends the job's
// environment once (the plugin saved it in slurmstepd, as Slurm gave it to
// the batch script). Checked whole, filtered by the site's policy
// (requeue.environment_drop), kept root-only for the run's later attempts;
// the first attempt's stands against a second send, and replaces a file
// kept for another owner or job. The answer says how many variables were kept
// and their digest, never a value.
#include <boost/json.hpp>

#include "broker/core/api_util.hpp"
#include "broker/recovery/job_environment.hpp"
#include "broker/api/runs_api.hpp"
#include "common/digest.hpp"
#include "common/json_fields.hpp"

namespace shardnet::broker {

namespace json = boost::json;
using namespace detail;

void RunsApi::keep_environment(const std::string &id, const ApiRequest &req, const TokenEntry &who, const Reply &reply) {
    json::error_code ec;
    json::value v = json::parse(req.body, ec);
    if (ec || !v.is_object()) return reply(error_response(400, "bad_json", "body is not a JSON object"));
    const json::object &o = v.as_object();
    if (JsonFields top(o, ""); !top.only({"attempt", "environment"})) return reply(error_response(400, "bad_field", top.error()));
    Fields f{o, {}, {}};
    long long attempt = 0, world = 0;
    if (!f.integer("attempt", 1, 1000000, attempt)) return reply(bad_field(f));
    const json::value *list = o.if_contains("environment");
    std::vector<std::string> env;
    if (!list) return reply(error_response(400, "bad_field", "environment: missing", "environment"));
    if (std::string why = read_environment(*list, env); !why.empty()) return reply(error_response(400, "bad_field", why, "environment"));
    // Only the first attempt's: a later one's environment is the broker's
    // replay of it (or, without one, the broker's own), never the user's.
    if (attempt != 1)
        return reply(error_response(409, "not_first_attempt", "only attempt 1's environment is kept; later attempts replay it", "attempt"));
    if (auto refused = refuse_attempt_writer(id, who, attempt, world, "environments")) return reply(*refused);
    std::vector<std::string> kept;
    std::size_t dropped = 0;
    for (auto &e : env) {
        if (environment_dropped(e.substr(0, e.find('=')), cfg_.environment_drop)) ++dropped;
        else kept.push_back(std::move(e));
    }
    on_store(reply, [this, id, attempt, kept = std::move(kept), dropped](const Reply &reply) {
        // Whose it is: the run's owner and attempt 1's job. A file kept for
        // another owner or job (a refused decision's, under a run id
        // squatted before this run existed) is not this run's: replaced.
        const auto origin = first_attempt_origin(core_, id);
        if (!origin) {
            // Its job's spec is being captured (a run whose jobs report with
            // an admin token): the agent sends it again (5xx), never drops it.
            ApiResponse r = error_response(503, "no_job_yet", "run " + id + " has no job of attempt 1 recorded yet (its first heartbeat and spec come first); send it again");
            r.retry_after = 2;
            return reply(std::move(r));
        }
        std::string err;
        const std::string dir = private_dir(cfg_.database, err);
        bool existed = false;
        if (!dir.empty()) err = write_environment_file(dir, id, *origin, kept, existed);
        if (!err.empty()) {
            log_warn("the job's environment not kept", id, err);
            return reply(error_response(503, "store_unavailable", "the environment could not be kept; send it again"));
        }
        if (existed) return reply(ok_json(200, json::object{{"kept", false}, {"why", "the run's environment is kept already (an earlier attempt's)"}}));
        std::string text;
        for (const auto &e : kept) text += e, text += '\0';
        log_json("info", "the job's environment kept", json::object{{"run", id}, {"attempt", attempt}, {"variables", kept.size()},
                                                                    {"dropped", dropped}, {"sha256", sha256_hex(text)}});
        reply(ok_json(200, json::object{{"kept", true}, {"variables", kept.size()}, {"dropped", dropped}, {"sha256", sha256_hex(text)}}));
    });
}

}  // namespace shardnet::broker
