#include "server/static_site.h"

#include <array>
#include <utility>

#include "server/embedded_files.h"

namespace trellis {
namespace {

constexpr std::string_view kPrefix = "/chat/";
constexpr std::string_view kIndex = "index.html";

// By file name extension; anything else is served as opaque bytes.
std::string_view content_type_of(std::string_view name) {
  constexpr std::array<std::pair<std::string_view, std::string_view>, 8> kTypes = {{
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".json", "application/json"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".txt", "text/plain; charset=utf-8"},
  }};
  for (const auto& [extension, type] : kTypes) {
    if (name.ends_with(extension)) return type;
  }
  return "application/octet-stream";
}

}  // namespace

std::optional<StaticFile> find_static_file(std::string_view path) {
  std::string_view name;
  if (path == "/") {
    name = kIndex;
  } else if (path.starts_with(kPrefix)) {
    name = path.substr(kPrefix.size());
  } else {
    return std::nullopt;
  }
  for (const EmbeddedFile& file : embedded_files()) {
    if (file.path == name) return StaticFile{content_type_of(name), file.bytes};
  }
  return std::nullopt;
}

std::string_view static_file_headers() {
  return "Content-Security-Policy: default-src 'self'; object-src 'none'; base-uri 'none'; "
         "form-action 'none'; frame-ancestors 'none'\r\n"
         "X-Content-Type-Options: nosniff\r\n"
         "Referrer-Policy: no-referrer\r\n"
         "Cache-Control: no-cache\r\n";
}

}  // namespace trellis
