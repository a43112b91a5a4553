// `trellis serve --config FILE`: flags read from a file, as the service's
// /etc/trellis/serve.conf holds them. One flag per line, `name = value` with the flag's long name
// (no dashes; a value may be quoted), `name = true` for a flag without a value (`false` leaves it
// out), `#` comments and blank lines; of two lines of one name the later wins. The lines become
// command-line flags in place of `--config FILE`; a flag also given on the command line keeps
// that value, and a name that is no flag of the command is refused by the parser like a
// mistyped flag.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/result.h"

namespace trellis::cli {

// The arguments (without the program name) with the first `--config FILE` (or `--config=FILE`)
// after `subcommand` replaced by the file's flags; unchanged when there is none. `long_names`
// maps the subcommand's one-letter flags to their long names ("m" -> "model"), so that `-m F`
// on the command line wins over `model = ...` in the file. Errors: the file cannot be read, or
// a line is not `name = value` (the line number is named).
Result<std::vector<std::string>> expand_config_file(
    std::vector<std::string> args, const std::string& subcommand,
    const std::map<std::string, std::string>& long_names);

}  // namespace trellis::cli
