// Answers of a cluster's Slurm that the broker could not read (a
// data_parser version it does not know, a field of another shape), kept per
// cluster until an answer is read again. Such an answer says nothing about a
// job: the broker reports it (the log, GET /v1/health, GET /v1/clusters and
// the dashboard's banner) and decides nothing from it.
#pragma once
#include <map>
#include <mutex>
#include <string>

namespace shardnet::broker {

class SlurmReadErrors {
public:
    struct Entry {
        std::string why;           // the last one
        double since = 0, last = 0;   // wall clock, seconds
        long long count = 0;
    };
    // An answer under slurm_conf could not be read; logged when it starts.
    void unreadable(const std::string &slurm_conf, const std::string &why);
    // One was read: the cluster's error ends (logged).
    void readable(const std::string &slurm_conf);
    std::map<std::string, Entry> by_conf() const;

private:
    mutable std::mutex mu_;
    std::map<std::string, Entry> errors_;
};

}  // namespace shardnet::broker
