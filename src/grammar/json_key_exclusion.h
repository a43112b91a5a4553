// GBNF for "any object key but these": the keys an object may add beside its listed properties
// must not repeat a listed name, or a listed property could come back with an unchecked value.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace trellis {

// Rules, as (name, body) pairs, whose first matches the contents of a JSON string (between the
// quotes) whose decoded text is none of `names`. The language is a trie of the names walked
// character by character: at each node, a character that leaves the trie (then `any_char_rule`
// for the rest), a child's character, or the end when the node ends no name. Characters are
// read in one spelling each (json_escaped_char / json_char_gbnf) up to where the key leaves the
// trie, so that an escape cannot spell a listed name unnoticed. `new_rule_name` hands out
// unused rule names.
std::vector<std::pair<std::string, std::string>> json_key_exclusion_rules(
    const std::vector<std::string>& names, const std::function<std::string()>& new_rule_name,
    const std::string& any_char_rule);

}  // namespace trellis
