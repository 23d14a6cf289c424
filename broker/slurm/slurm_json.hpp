// Slurm's JSON (`squeue --json`) read per data_parser version into one
// shape, the job records as Slurm 22.05 prints them, so that the rest of
// the broker reads one shape whatever Slurm a cluster runs. Each version is
// read only when fixtures captured from that Slurm's own daemons show its
// shape (tests/fixtures/slurm/, doc/slurm-versions.md); any other answer is
// an error naming what could not be read, never an empty list of jobs.
#pragma once
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <string>
#include <vector>

namespace shardnet::broker {

// The jobs of an answer as Slurm wrote them, and the data_parser version
// that wrote them ("v0.0.38", "v0.0.42"). job_id, user_id and comment
// have one shape in every version; a record to read further is first
// given 22.05's shape with record().
struct SlurmJobs {
    std::string parser;
    boost::json::array jobs;
    bool numbers_as_objects = false;
    // The job's record in 22.05's shape: "" or why it cannot be read.
    std::string record(boost::json::object &job) const;
};

// "" and out filled, or why the answer cannot be read.
std::string read_squeue_json(const std::string &text, SlurmJobs &out);

// A job record of data_parser v0.0.39 and later in 22.05's shape: numbers
// that are {set, infinite, number} objects as numbers (null when not set,
// 4294967295, Slurm's INFINITE, when infinite), job_state's list of base
// state and flags as the one word Slurm's own job_state_string() prints,
// shared's list as its one word. "" or why it cannot be.
std::string job_record_as_v0038(boost::json::object &job);

// Every string of a job record made valid UTF-8 (make_valid_utf8), so that
// nothing Slurm printed as raw bytes leaves the broker as such; the names
// of the record's fields that changed.
std::vector<std::string> valid_utf8_record(boost::json::object &job);

// The word Slurm prints for a job state given as its list of base state and
// flags (["RUNNING", "COMPLETING"] -> "COMPLETING"); "" when none is known.
std::string job_state_word(const boost::json::array &states);

}  // namespace shardnet::broker
