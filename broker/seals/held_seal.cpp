#include "broker/seals/held_seal.hpp"

#include <algorithm>
#include <boost/json.hpp>
#include <map>

#include "broker/seals/sealed_list.hpp"
#include "broker/store/store.hpp"

namespace shardnet::broker::sealed_list {

namespace json = boost::json;

std::optional<HeldSeal> held_seal(Store &store, const std::string &run, const std::string &name, long long rank,
                                  const std::string &broker_name) {
    for (const auto &c : store.seals().list_checkpoints(run)) {
        if (c.name != name) continue;
        HeldSeal h{c.attempt, c.ranks, broker_name, false, {}};
        Committed committed;
        read_commits(store, run, c.attempt, name, committed);
        for (auto *from : {&committed.entries, &committed.others})
            for (auto &e : *from)
                if (e.rank == rank) h.rank_files.push_back(std::move(e));
        return h;
    }
    auto carried = store.seals().carried_seal(run, name);
    if (!carried) return std::nullopt;
    HeldSeal h{carried->attempt, carried->ranks, carried->sealed_by, true, {}};
    // Checked on arrival (seals/carried.cpp): one entry per rank and file.
    const json::value files = json::parse(carried->files);
    for (const auto &f : files.as_array()) {
        file_list::Entry e;
        if (std::string err = file_list::read_entry(f, "files", e); !err.empty())
            throw std::runtime_error("carried seal " + name + " of run " + run + ": " + err);
        if (e.rank == rank) h.rank_files.push_back(std::move(e));
    }
    return h;
}

std::string difference(const std::vector<file_list::Entry> &sealed, const json::array &files) {
    std::map<std::string, const file_list::Entry *> held;
    for (const auto &e : sealed) held[e.path] = &e;
    std::size_t matched = 0;
    for (const auto &f : files) {
        const json::object &o = f.as_object();   // checked as the commit came in
        const std::string path(o.at("path").as_string()), sha(o.at("sha256").as_string());
        const auto bytes = o.at("bytes").to_number<unsigned long long>();
        auto it = held.find(path);
        if (it == held.end()) return path.substr(0, 200) + " is not one of its files";
        if (it->second->sha256 != sha || it->second->bytes != bytes)
            return path.substr(0, 200) + " is sha256 " + sha + " (" + std::to_string(bytes) + " bytes) here, sealed as sha256 " +
                   it->second->sha256 + " (" + std::to_string(it->second->bytes) + " bytes)";
        ++matched;
    }
    if (matched != held.size())
        for (const auto &[path, e] : held) {
            bool given = std::any_of(files.begin(), files.end(), [&](const json::value &f) { return f.at("path").as_string() == path; });
            if (!given) return path.substr(0, 200) + " is sealed but not in this commit";
        }
    return "";
}

}  // namespace shardnet::broker::sealed_list
