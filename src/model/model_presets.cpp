#include "model/model_presets.h"

namespace trellis {
namespace {

ModelHParams make_hparams(int64_t n_vocab, int64_t n_ctx, int64_t n_embd, int64_t n_layer,
                          int64_t n_head, int64_t n_head_kv, int64_t n_ff) {
  ModelHParams hp;
  hp.n_vocab = n_vocab;
  hp.n_ctx_train = n_ctx;
  hp.n_embd = n_embd;
  hp.n_layer = n_layer;
  hp.n_head = n_head;
  hp.n_head_kv = n_head_kv;
  hp.n_ff = n_ff;
  hp.n_rot = n_embd / n_head;
  hp.rope_freq_base = 10000.0;
  hp.rms_norm_eps = 1e-5;
  return hp;
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      {"tiny", "4 layers, width 128, GQA 4/2 heads, vocab 2048 (a few MB, for tests)",
       make_hparams(2048, 512, 128, 4, 4, 2, 384)},
      {"small", "12 layers, width 768, GQA 12/4 heads, vocab 32000 (~110M parameters)",
       make_hparams(32000, 2048, 768, 12, 12, 4, 2048)},
      {"tinyllama-1.1b",
       "TinyLlama-1.1B shapes: 22 layers, width 2048, GQA 32/4 heads, vocab 32000",
       make_hparams(32000, 2048, 2048, 22, 32, 4, 5632)},
  };
  return presets;
}

std::optional<ModelPreset> find_model_preset(std::string_view name) {
  for (const ModelPreset& preset : model_presets()) {
    if (preset.name == name) return preset;
  }
  return std::nullopt;
}

}  // namespace trellis
