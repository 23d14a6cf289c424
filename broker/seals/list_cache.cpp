#include "broker/seals/list_cache.hpp"

namespace shardnet::broker::sealed_list {

std::shared_ptr<const Built> build(std::vector<file_list::Entry> entries, std::vector<file_list::Entry> others) {
    auto b = std::make_shared<Built>();
    file_list::order(entries);
    for (auto &e : entries) {
        const bool repeat = !b->sorted.empty() && file_list::leaf_data(b->sorted.back()) == file_list::leaf_data(e);
        if (!repeat) {
            b->tree.append_leaf_hash(file_list::leaf(e));
            b->sorted.push_back(e);
        }
        const uint64_t index = b->sorted.size() - 1;
        auto &mine = b->by_rank[e.rank];
        if (mine.empty() || mine.back() != index) mine.push_back(index);
    }
    b->summary = file_list::summarize(b->sorted);
    b->others = std::move(others);
    return b;
}

std::shared_ptr<const Built> Cache::find(const std::string &key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = at_.find(key);
    if (it == at_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    ++hits_;
    return it->second->second;
}

void Cache::put(const std::string &key, std::shared_ptr<const Built> list) {
    std::lock_guard<std::mutex> lock(mu_);
    ++builds_;
    if (!list || list->files() > max_files_ || at_.count(key)) return;
    files_ += list->files();
    order_.emplace_front(key, std::move(list));
    at_[key] = order_.begin();
    while (order_.size() > max_lists_ || files_ > max_files_) {
        files_ -= order_.back().second->files();
        at_.erase(order_.back().first);
        order_.pop_back();
    }
}

std::size_t Cache::lists() const { std::lock_guard<std::mutex> lock(mu_); return order_.size(); }
std::size_t Cache::files() const { std::lock_guard<std::mutex> lock(mu_); return files_; }
unsigned long long Cache::hits() const { std::lock_guard<std::mutex> lock(mu_); return hits_; }
unsigned long long Cache::builds() const { std::lock_guard<std::mutex> lock(mu_); return builds_; }

}  // namespace shardnet::broker::sealed_list
