// gpt-oss's tools as the TypeScript namespace of its developer message.
#include "server/harmony_tools.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace trellis {
namespace {

using Json = nlohmann::ordered_json;

TEST(HarmonyToolsTest, FunctionsBecomeATypeScriptNamespace) {
  std::vector<RequestTool> tools(2);
  tools[0].name = "get_weather";
  tools[0].description = "Weather in a city\nand its country";
  tools[0].parameters = Json::parse(R"({"type": "object", "properties": {
      "city": {"type": "string", "description": "The city"},
      "unit": {"enum": ["c", "f"], "default": "c"},
      "days": {"type": ["integer", "null"]},
      "tags": {"type": "array", "items": {"type": "string"}},
      "where": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]},
      "any": {}},
    "required": ["city"]})");
  tools[1].name = "now";
  EXPECT_EQ(harmony_tools_text(tools),
            "# Tools\n\n## functions\n\nnamespace functions {\n\n"
            "// Weather in a city\n// and its country\n"
            "type get_weather = (_: {\n"
            "// The city\n"
            "city: string,\n"
            "unit?: \"c\" | \"f\", // default: \"c\"\n"
            "days?: number | null,\n"
            "tags?: string[],\n"
            "where?: {\nlat: number,\n},\n"
            "any?: any,\n"
            "}) => any;\n\n"
            "type now = () => any;\n\n"
            "} // namespace functions");
}

}  // namespace
}  // namespace trellis
