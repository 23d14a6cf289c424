// The store's side of federation reads: where a decision of this broker's
// sent a run (decisions the peer accepted), for the run's onward view
// (federation/onward.hpp).
#include <sqlite3.h>

#include "broker/store/sql.hpp"
#include "broker/store/store.hpp"

namespace shardnet::broker {

using namespace sql;

namespace sql {

std::span<const Sql> federation_statements() {
    static const Sql table[] = {
        {"moved_to", "SELECT peer, to_attempt, coalesce(new_job, 0) FROM decisions WHERE run = ? AND state = 'delivered' "
                     "AND peer IS NOT NULL ORDER BY to_attempt DESC, created DESC LIMIT 1"},
    };
    return table;
}

}  // namespace sql

std::optional<Store::MovedRow> Store::moved_to(const std::string &run) {
    auto *s = stmt("moved_to");
    Done done{s};
    Binder(s).text(run);
    if (!row(s)) return std::nullopt;
    return MovedRow{col_text(s, 0), sqlite3_column_int64(s, 1), sqlite3_column_int64(s, 2)};
}

}  // namespace shardnet::broker
