#include "grammar/json_key_exclusion.h"

#include <map>
#include <utility>

#include "base/utf8.h"
#include "grammar/code_point_set.h"
#include "grammar/gbnf_text.h"
#include "grammar/regex_grammar.h"

namespace trellis {

namespace json_key_exclusion_impl {
namespace {

struct TrieNode {
  std::map<char32_t, size_t> children;  // code point -> node index
  bool ends_name = false;
};

std::vector<TrieNode> build_trie(const std::vector<std::string>& names) {
  std::vector<TrieNode> nodes(1);
  for (const std::string& name : names) {
    size_t node = 0;
    for (size_t pos = 0; pos < name.size();) {
      const char32_t cp = decode_utf8(name, pos);
      auto it = nodes[node].children.find(cp);
      if (it == nodes[node].children.end()) {
        it = nodes[node].children.emplace(cp, nodes.size()).first;
        nodes.emplace_back();
      }
      node = it->second;
    }
    nodes[node].ends_name = true;
  }
  return nodes;
}

}  // namespace
}  // namespace json_key_exclusion_impl

std::vector<std::pair<std::string, std::string>> json_key_exclusion_rules(
    const std::vector<std::string>& names, const std::function<std::string()>& new_rule_name,
    const std::string& any_char_rule) {
  using json_key_exclusion_impl::TrieNode;
  const std::vector<TrieNode> nodes = json_key_exclusion_impl::build_trie(names);
  // The nodes that end a name and have no children (one per name, mostly) all say the same: one
  // more character, then anything. They share one rule.
  auto is_leaf = [&](size_t i) { return i > 0 && nodes[i].children.empty(); };
  std::vector<std::string> rule_names;
  std::string leaf_rule;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (is_leaf(i) && leaf_rule.empty()) leaf_rule = new_rule_name();
    rule_names.push_back(is_leaf(i) ? leaf_rule : new_rule_name());
  }
  std::vector<std::pair<std::string, std::string>> rules;
  bool leaf_written = false;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const TrieNode& node = nodes[i];
    if (is_leaf(i) && std::exchange(leaf_written, true)) continue;
    std::vector<std::string> alternatives;
    CodePointSet leaving = CodePointSet::all();
    for (const auto& [cp, child] : node.children) {
      leaving.remove_range(cp, cp);
      alternatives.push_back(gbnf_literal(json_escaped_char(cp)) + " " + rule_names[child]);
    }
    if (!leaving.empty())
      alternatives.push_back(json_char_gbnf(leaving) + " " + any_char_rule + "*");
    std::string joined;
    for (const std::string& alternative : alternatives)
      joined += (joined.empty() ? "" : " | ") + alternative;
    // A node that ends no listed name may also end the key here.
    std::string body = node.ends_name ? joined : "( " + joined + " )?";
    rules.emplace_back(rule_names[i], body);
  }
  return rules;
}

}  // namespace trellis
