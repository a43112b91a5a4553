#include "model_summary.h"

#include <cstdio>
#include <map>
#include <memory>

#include "model/encoder_model.h"
#include "model/model.h"
#include "model/pooling.h"

namespace trellis::cli {
namespace {

using nlohmann::ordered_json;

ordered_json value_json(const GgufValue& value) {
  switch (value.type()) {
    case GgufType::STRING:
      return std::get<std::string>(value.storage);
    case GgufType::BOOL:
      return std::get<bool>(value.storage);
    case GgufType::FLOAT32:  // via its shortest text, so 1e-5f shows as 1e-05
    case GgufType::FLOAT64:
      return std::stod(value.to_display_string());
    case GgufType::ARRAY:
      return value.to_display_string();
    case GgufType::UINT64:
      return std::get<uint64_t>(value.storage);
    default: {
      int64_t v = 0;
      value.as_int64(&v);
      return v;
    }
  }
}

std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024.0 && unit < 4) {
    v /= 1024.0;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), unit == 0 ? "%.0f %s" : "%.2f %s", v, units[unit]);
  return buf;
}

std::string tokenizer_kind(const std::string& model) {
  if (model == "llama") return "SPM";
  if (model == "gpt2") return "BPE";
  if (model == "bert") return "WordPiece";
  return "unknown";
}

}  // namespace

namespace {

// The family whose forward pass binds the file (an encoder's or a decoder's), or why none does.
Result<std::string> runnable_family(const GgufFile& file) {
  Result<std::string> arch = file.get_string("general.architecture");
  if (arch.ok() && find_encoder_family(*arch) != nullptr) {
    Result<std::unique_ptr<EncoderModel>> encoder = EncoderModel::load(file);
    if (!encoder.ok()) return encoder.error();
    return *arch;
  }
  Result<std::unique_ptr<Model>> decoder = Model::load(file);
  if (!decoder.ok()) return decoder.error();
  return (*decoder)->hparams().arch;
}

}  // namespace

ordered_json model_summary_json(const GgufFile& file) {
  ordered_json j;
  j["file"] = file.name();
  j["file_bytes"] = file.file_size();
  j["gguf_version"] = file.version();
  j["alignment"] = file.alignment();
  j["metadata_count"] = file.metadata().size();
  std::string arch = file.get_string_or("general.architecture", "").value();
  j["architecture"] = arch;
  j["name"] = file.get_string_or("general.name", "").value();

  ordered_json hparams = ordered_json::object();
  if (!arch.empty()) {
    for (const GgufKv& kv : file.metadata()) {
      if (kv.key.starts_with(arch + "."))
        hparams[kv.key.substr(arch.size() + 1)] = value_json(kv.value);
    }
  }
  j["hyperparameters"] = hparams;

  ordered_json tok = ordered_json::object();
  std::string model = file.get_string_or("tokenizer.ggml.model", "").value();
  tok["model"] = model;
  tok["kind"] = tokenizer_kind(model);
  tok["pre"] = file.get_string_or("tokenizer.ggml.pre", "default").value();
  Result<const GgufArray*> tokens = file.get_array("tokenizer.ggml.tokens");
  tok["vocab_size"] = tokens.ok() ? (*tokens)->items.size() : 0;
  Result<const GgufArray*> merges = file.get_array("tokenizer.ggml.merges");
  tok["merges"] = merges.ok() ? (*merges)->items.size() : 0;
  for (const char* id : {"bos", "eos", "unknown", "padding"}) {
    Result<int64_t> value = file.get_int(std::string("tokenizer.ggml.") + id + "_token_id");
    if (value.ok()) tok[std::string(id) + "_token_id"] = *value;
  }
  j["tokenizer"] = tok;

  std::map<std::string, int> type_counts;
  uint64_t tensor_bytes = 0;
  int64_t n_params = 0;
  for (const GgufTensor& t : file.tensors()) {
    ++type_counts[std::string(dtype_name(t.type))];
    tensor_bytes += t.n_bytes;
    n_params += t.n_elements;
  }
  j["tensor_count"] = file.tensors().size();
  j["tensor_types"] = type_counts;
  j["parameters"] = n_params;
  j["tensor_bytes"] = tensor_bytes;
  // Whether a forward pass can run this file: every key and tensor its family needs is there.
  Result<std::string> family = runnable_family(file);
  j["runnable"] = family.ok();
  if (family.ok()) {
    j["family"] = *family;  // mixtral for a llama file with experts
    Result<std::string> arch = file.get_string("general.architecture");
    Result<int64_t> pooling = file.get_int_or((arch.ok() ? *arch : "") + ".pooling_type", 0);
    const Pooling kind =
        pooling.ok() ? pooling_from_code(*pooling).value_or(Pooling::NONE) : Pooling::NONE;
    if (find_encoder_family(*family) != nullptr || kind != Pooling::NONE) {
      j["runs_as"] = std::string(kind == Pooling::RANK ? "reranker" : "embedding model");
    } else {
      j["runs_as"] = "generative model";
    }
  } else {
    j["not_runnable_because"] = family.error().message;
  }
  return j;
}

std::string model_summary_text(const GgufFile& file) {
  ordered_json j = model_summary_json(file);
  std::string out;
  auto line = [&out](const std::string& label, const std::string& value) {
    char head[32];
    std::snprintf(head, sizeof(head), "%-16s", (label + ":").c_str());
    out += head + value + "\n";
  };
  auto str = [](const ordered_json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  line("file", file.name() + " (" + human_bytes(file.file_size()) + ")");
  line("gguf", "version " + std::to_string(file.version()) + ", alignment " +
                   std::to_string(file.alignment()) + ", " +
                   std::to_string(file.metadata().size()) + " metadata keys");
  line("architecture", j["architecture"].get<std::string>());
  line("name", j["name"].get<std::string>());
  for (const auto& [key, value] : j["hyperparameters"].items()) {
    out += "  " + key + " = " + str(value) + "\n";
  }
  const ordered_json& tok = j["tokenizer"];
  std::string tok_line = str(tok["model"]) + " (" + str(tok["kind"]) + "), pre " + str(tok["pre"]) +
                         ", " + str(tok["vocab_size"]) + " tokens";
  if (tok["merges"].get<size_t>() > 0) tok_line += ", " + str(tok["merges"]) + " merges";
  if (tok.contains("bos_token_id")) tok_line += ", bos " + str(tok["bos_token_id"]);
  if (tok.contains("eos_token_id")) tok_line += ", eos " + str(tok["eos_token_id"]);
  line("tokenizer", tok_line);
  std::string types;
  for (const auto& [type, count] : j["tensor_types"].items()) {
    types += (types.empty() ? "" : ", ") + type + " x" + str(count);
  }
  line("tensors", str(j["tensor_count"]) + " (" + types + ")");
  line("parameters", str(j["parameters"]));
  line("tensor data", human_bytes(j["tensor_bytes"].get<uint64_t>()));
  line("runs", j["runnable"].get<bool>()
                   ? "yes (" + j["family"].get<std::string>() + " forward pass, " +
                         j["runs_as"].get<std::string>() + ")"
                   : "no: " + j["not_runnable_because"].get<std::string>());
  return out;
}

}  // namespace trellis::cli
