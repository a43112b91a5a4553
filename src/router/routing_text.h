// The text a request is routed by: what the replica will turn into the prompt's tokens, in the
// same order, so that requests sharing a prompt prefix share a text prefix. A completion's prompt
// as it is (several prompts joined by newlines, token arrays as their numbers); a chat's messages
// concatenated in order, each as its role and its text, so that a conversation that goes on
// extends the text its earlier turns were routed by.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace trellis {

// `request`: a /v1/completions body (an object); fields of the wrong type add nothing (the
// replica rejects the request).
std::string completion_routing_text(const nlohmann::json& request);
// `request`: a /v1/chat/completions body (an object).
std::string chat_routing_text(const nlohmann::json& request);

}  // namespace trellis
