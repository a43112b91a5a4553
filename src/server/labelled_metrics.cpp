#include "server/labelled_metrics.h"

#include <map>

#include "server/metrics.h"

namespace trellis {
namespace {

struct Family {
  std::string header;  // its # HELP and # TYPE lines
  std::string samples;
};

// The family a line's metric belongs to: the name before '{' or ' ', less a histogram's suffix
// when the family of the shorter name was declared.
std::string family_of(std::string_view name, const std::map<std::string, size_t>& known) {
  for (std::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (!name.ends_with(suffix)) continue;
    const std::string base(name.substr(0, name.size() - suffix.size()));
    if (known.contains(base)) return base;
  }
  return std::string(name);
}

// `line` with label="value" first among its labels.
std::string with_label(std::string_view line, const std::string& label_text) {
  const size_t name_end = line.find_first_of("{ ");
  if (name_end == std::string_view::npos) return std::string(line);
  std::string out(line.substr(0, name_end));
  if (line[name_end] == '{') {
    out += "{" + label_text + (line[name_end + 1] == '}' ? "" : ",");
    out += line.substr(name_end + 1);
  } else {
    out += "{" + label_text + "}";
    out += line.substr(name_end);
  }
  return out;
}

}  // namespace

std::string merge_labelled_metrics(std::string_view label,
                                   const std::vector<std::pair<std::string, std::string>>& sources) {
  std::vector<Family> families;
  std::map<std::string, size_t> index;  // family name -> families[i]
  for (const auto& [value, text] : sources) {
    const std::string label_text =
        std::string(label) + "=\"" + escape_label_value(value) + "\"";
    size_t at = 0;
    while (at < text.size()) {
      size_t end = text.find('\n', at);
      if (end == std::string::npos) end = text.size();
      const std::string_view line(text.data() + at, end - at);
      at = end + 1;
      if (line.empty()) continue;
      if (line.starts_with("# HELP ") || line.starts_with("# TYPE ")) {
        const std::string_view rest = line.substr(7);
        const std::string name(rest.substr(0, rest.find(' ')));
        auto [it, added] = index.try_emplace(name, families.size());
        if (added) families.emplace_back();
        // The first source's HELP and TYPE stand for all (services of a kind write the same).
        Family& family = families[it->second];
        if (family.header.find(line.substr(0, 7)) == std::string::npos)
          family.header += std::string(line) + "\n";
        continue;
      }
      if (line.starts_with('#')) continue;
      const std::string name = family_of(line.substr(0, line.find_first_of("{ ")), index);
      auto [it, added] = index.try_emplace(name, families.size());
      if (added) families.emplace_back();
      families[it->second].samples += with_label(line, label_text) + "\n";
    }
  }
  std::string out;
  for (const Family& family : families) out += family.header + family.samples;
  return out;
}

}  // namespace trellis
