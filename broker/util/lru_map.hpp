// A map that keeps at most `capacity` entries, dropping the one used
// longest ago when a new key needs room. Not thread-safe: its owner keeps it
// on one thread (the goodput marks live on the store thread).
#pragma once
#include <cstddef>
#include <list>
#include <string>
#include <unordered_map>
#include <utility>

namespace shardnet::broker {

template <class V>
class LruMap {
public:
    explicit LruMap(std::size_t capacity) : capacity_(capacity ? capacity : 1) {}

    // The value of KEY, made (default) when missing; either way now the
    // most recently used. Making one past capacity drops the least recent.
    V &touch(const std::string &key) {
        if (auto it = map_.find(key); it != map_.end()) {
            order_.splice(order_.begin(), order_, it->second.at);
            return it->second.value;
        }
        if (map_.size() >= capacity_) {
            map_.erase(order_.back());
            order_.pop_back();
        }
        order_.push_front(key);
        return map_.emplace(key, Entry{V{}, order_.begin()}).first->second.value;
    }
    bool contains(const std::string &key) const { return map_.count(key) > 0; }
    std::size_t size() const { return map_.size(); }

private:
    struct Entry { V value; std::list<std::string>::iterator at; };
    std::size_t capacity_;
    std::list<std::string> order_;   // most recent first
    std::unordered_map<std::string, Entry> map_;
};

}  // namespace shardnet::broker
