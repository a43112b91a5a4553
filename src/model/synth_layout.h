// What a synthesized GGUF holds for each model family: its architecture keys (ARCH.*) and the
// list of tensors with shapes, types and how each is filled. Both come from the family's tables
// (model/family_tensors.h, model/family_keys.h), the lists the loader binds and reads, so a file
// written from them has exactly the tensors and keys Model::load requires.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_presets.h"
#include "tensor/dtype.h"

namespace trellis {

class GgufWriter;

enum class SynthFill {
  ONES,    // norm weights
  NORMAL,  // matrices and biases: N(0, σ²) per element, from the tensor's and row's seed
  VALUES,  // a single row given in SynthTensor::values (rope_freqs)
};

struct SynthTensor {
  std::string name;
  DType type;
  std::vector<int64_t> shape;  // shape[0] is the row length; rows: the product of the others
  SynthFill fill;
  std::vector<float> values;  // the row when fill is VALUES; shape[0] elements
  float stddev = 0.02f;       // of a NORMAL fill
};

// The tensors of `preset`'s family in file order: token_embd, the layers (blk.N.*), output_norm,
// output (unless tied), then the rope factors of the preset's scaling (rope_freqs for Llama 3's,
// rope_factors_short/long for LongRoPE). Matrices are `type`, or f16 when
// their rows do not fit `type`'s block size; norms, biases and rope_freqs are f32.
// Precondition: preset.hparams.arch is a supported architecture.
std::vector<SynthTensor> synth_tensor_list(const ModelPreset& preset, DType type);

// Writes general.architecture and every ARCH.* hyperparameter key of `preset` that its family's
// readers (ours and llama.cpp's) use: sizes, heads, eps, rope base and dimension count;
// attention.key_length/value_length when the head size is not n_embd / n_head; rope.scaling.*
// (linear, or yarn with its original context) when the preset scales its rope; for families with a
// sliding window the window, its layer pattern and rope.freq_base_swa.
void set_arch_metadata(GgufWriter& writer, const ModelPreset& preset);

}  // namespace trellis
