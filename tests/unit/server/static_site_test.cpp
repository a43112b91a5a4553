// The chat page's files as embedded in the binary: what each request path maps to, the content
// types, and that nothing outside the embedded list can be named.
#include "server/static_site.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "server/embedded_files.h"

namespace trellis {
namespace {

std::string source_file(const std::string& name) {
  std::ifstream in(std::string(TRELLIS_SOURCE_DIR) + "/web/chat/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(StaticSiteTest, RootIsTheIndexPage) {
  const std::optional<StaticFile> root = find_static_file("/");
  ASSERT_TRUE(root.has_value());
  EXPECT_EQ(root->content_type, "text/html; charset=utf-8");
  EXPECT_TRUE(root->bytes == source_file("index.html")) << "rebuild the server library?";
  const std::optional<StaticFile> index = find_static_file("/chat/index.html");
  ASSERT_TRUE(index.has_value());
  EXPECT_EQ(index->bytes.data(), root->bytes.data());
}

TEST(StaticSiteTest, EveryEmbeddedFileIsServedByteForByte) {
  ASSERT_GE(embedded_files().size(), 5u);
  for (const EmbeddedFile& file : embedded_files()) {
    const std::optional<StaticFile> served = find_static_file("/chat/" + std::string(file.path));
    ASSERT_TRUE(served.has_value()) << file.path;
    const std::string source = source_file(std::string(file.path));
    // Compared whole; on a difference only the sizes are printed, not the files.
    EXPECT_TRUE(served->bytes == source) << file.path << ": " << served->bytes.size()
                                         << " bytes embedded, " << source.size() << " in web/chat/";
  }
}

TEST(StaticSiteTest, ContentTypesByExtension) {
  EXPECT_EQ(find_static_file("/chat/app.js")->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(find_static_file("/chat/style.css")->content_type, "text/css; charset=utf-8");
  EXPECT_EQ(find_static_file("/chat/icon.svg")->content_type, "image/svg+xml");
}

TEST(StaticSiteTest, OnlyTheEmbeddedNamesMatch) {
  for (const char* path :
       {"", "/index.html", "/chat", "/chat/", "/chat//app.js", "/chat/../chat/app.js",
        "/chat/./app.js", "/chat/APP.JS", "/chat/app.js/", "/chat/%61pp.js", "/v1/models",
        "/health", "chat/app.js", "/x/chat/app.js"}) {
    EXPECT_FALSE(find_static_file(path).has_value()) << path;
  }
}

TEST(StaticSiteTest, HeadersEndLinesAndRestrictThePage) {
  const std::string headers(static_file_headers());
  EXPECT_NE(headers.find("Content-Security-Policy: default-src 'self'"), std::string::npos);
  EXPECT_NE(headers.find("X-Content-Type-Options: nosniff\r\n"), std::string::npos);
  ASSERT_GE(headers.size(), 2u);
  EXPECT_EQ(headers.substr(headers.size() - 2), "\r\n");
  EXPECT_EQ(headers.find("\n\r\n"), std::string::npos) << "an empty line would end the head";
}

}  // namespace
}  // namespace trellis
