// The files of web/chat/, built into the binary: src/server/CMakeLists.txt runs
// cmake/embed_files.cmake at build time, which writes embedded_files.cpp (one byte array per file)
// into the build tree. static_site.h is the reader: it maps request paths onto these files.
#pragma once

#include <span>
#include <string_view>

namespace trellis {

struct EmbeddedFile {
  std::string_view path;   // relative to web/chat/, with '/' separators ("index.html")
  std::string_view bytes;  // the file's content, byte for byte
};

// Every embedded file, sorted by path; the views stay valid for the life of the program.
std::span<const EmbeddedFile> embedded_files();

}  // namespace trellis
