#include "config_file.h"

#include <algorithm>
#include <fstream>
#include <set>

namespace trellis::cli {
namespace {

std::string trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r") - begin + 1);
}

std::string unquote(const std::string& s) {
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front())
    return s.substr(1, s.size() - 2);
  return s;
}

// The long flag names given on the command line ("--port 8080", "--port=8080" and "-p 8080"
// when p is port's letter: "port").
std::set<std::string> given_flags(const std::vector<std::string>& args,
                                  const std::map<std::string, std::string>& long_names) {
  std::set<std::string> names;
  for (const std::string& arg : args) {
    if (arg.size() > 2 && arg.starts_with("--")) {
      names.insert(arg.substr(2, arg.find('=') - 2));
    } else if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
      const auto it = long_names.find(arg.substr(1, 1));
      if (it != long_names.end()) names.insert(it->second);
    }
  }
  return names;
}

Result<std::vector<std::string>> read_flags(const std::string& path,
                                            const std::set<std::string>& given) {
  std::ifstream in(path);
  if (!in) return Error{"cannot read the config file " + path};
  // (name, value) in the order of first appearance; a later line of the same name wins.
  std::vector<std::pair<std::string, std::string>> values;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = trim(line);
    if (line.empty() || line.front() == '#') continue;
    const size_t equals = line.find('=');
    const std::string name = equals == std::string::npos ? "" : trim(line.substr(0, equals));
    if (name.empty() || name.starts_with("-")) {
      return Error{path + ":" + std::to_string(number) + ": expected 'name = value', got '" +
                   line + "'"};
    }
    std::string value = unquote(trim(line.substr(equals + 1)));
    const auto same = std::find_if(values.begin(), values.end(),
                                   [&](const auto& entry) { return entry.first == name; });
    if (same != values.end()) {
      same->second = std::move(value);
    } else {
      values.emplace_back(name, std::move(value));
    }
  }
  std::vector<std::string> flags;
  for (const auto& [name, value] : values) {
    if (given.contains(name) || value == "false") continue;
    flags.push_back("--" + name);
    if (value != "true") flags.push_back(value);
  }
  return flags;
}

}  // namespace

Result<std::vector<std::string>> expand_config_file(
    std::vector<std::string> args, const std::string& subcommand,
    const std::map<std::string, std::string>& long_names) {
  const auto command = std::find(args.begin(), args.end(), subcommand);
  if (command == args.end()) return args;
  for (auto it = command + 1; it != args.end(); ++it) {
    std::string path;
    auto end = it + 1;
    if (*it == "--config") {
      if (end == args.end()) return Error{"--config needs a file"};
      path = *end++;
    } else if (it->starts_with("--config=")) {
      path = it->substr(9);
    } else {
      continue;
    }
    std::vector<std::string> rest(args.begin(), it);
    rest.insert(rest.end(), end, args.end());
    Result<std::vector<std::string>> flags = read_flags(path, given_flags(rest, long_names));
    if (!flags.ok()) return flags.error();
    const auto at = static_cast<std::ptrdiff_t>(it - args.begin());
    rest.insert(rest.begin() + at, flags->begin(), flags->end());
    return rest;
  }
  return args;
}

}  // namespace trellis::cli
