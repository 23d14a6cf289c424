// GET .../events?follow=1 as the HTTP session takes it (broker/http): the
// request through handle(); an answer that is a stream (ApiResponse::stream)
// is started on sink. The answer when it is none (an error), else nullopt.
#pragma once
#include <future>
#include <memory>
#include <optional>

#include "broker/http/api_message.hpp"

namespace shardnet::broker::testing {

inline std::optional<ApiResponse> follow_events(ApiHandler &api, const ApiRequest &req, std::shared_ptr<EventSink> sink) {
    std::promise<ApiResponse> p;
    api.handle(req, [&p](ApiResponse r) { p.set_value(std::move(r)); });
    ApiResponse r = p.get_future().get();
    if (!r.stream) return r;
    r.stream(std::move(sink));
    return std::nullopt;
}

}  // namespace shardnet::broker::testing
