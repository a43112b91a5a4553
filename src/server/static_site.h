// The chat page's static files (web/chat/, embedded in the binary): which request path maps to
// which file, and the response headers that go with it. "/" is index.html; every other file is
// under "/chat/" ("/chat/app.js"). Paths are matched exactly against the embedded list, so no
// request can name anything outside it ("..", encoded characters, queries never match).
//
//   if (std::optional<StaticFile> file = find_static_file("/")) reply(file->content_type, ...);
#pragma once

#include <optional>
#include <string_view>

namespace trellis {

struct StaticFile {
  std::string_view content_type;  // "text/html; charset=utf-8", ...
  std::string_view bytes;         // valid for the life of the program
};

// The file served at `path` (the request target without its query), or nullopt.
std::optional<StaticFile> find_static_file(std::string_view path);

// The extra response headers of every static file, each line ending "\r\n": a Content-Security-
// Policy that allows only the server's own scripts, styles and fetches (the page needs nothing
// else; model output can never load or run anything), no MIME sniffing, no framing, and
// revalidation on each load so a new binary's page is never mixed with an old cached one.
std::string_view static_file_headers();

}  // namespace trellis
