// Who is calling: the bearer token of a request, checked against the configured keys in constant
// time, and the prefix-cache namespace that the caller's key and cache_salt select.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/server_config.h"

namespace trellis {

// The token of an "Authorization: Bearer <token>" header value; nullopt for anything else. The
// scheme is case-insensitive; surrounding spaces are ignored.
std::optional<std::string> bearer_token(std::string_view authorization);

// Equality whose running time depends only on the lengths, not on where the texts differ (so a
// client cannot find a key byte by byte from response times).
bool constant_time_equal(std::string_view a, std::string_view b);

// True when `token` is one of `keys` (every key is compared, in constant time each).
bool api_key_accepted(const std::vector<std::string>& keys, std::string_view token);

// The radix-tree namespace of a request. With CacheIsolation::KEY it starts with a digest of the
// API key (the key itself is never stored), so no request can name another key's namespace;
// cache_salt, when given, is appended and narrows sharing to requests with the same salt.
// NONE without a salt: "" (everything shared).
std::string cache_namespace_for(CacheIsolation isolation, std::string_view api_key,
                                const std::optional<std::string>& cache_salt);

}  // namespace trellis
