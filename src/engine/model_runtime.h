// What the Engine stands on: a model file with its weights and tokenizer,
// and the size of the KV block pool.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/result.h"
#include "gguf/gguf_file.h"
#include "kv/block_pool.h"
#include "kv/kv_storage.h"
#include "model/model.h"
#include "prefix/prefix_cache.h"
#include "tokenizer/tokenizer.h"

namespace trellis {

struct LoadedModel {
  std::unique_ptr<GgufFile> file;  // the weights point into its mapping
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

// Chooses the part of a file's model this process holds (a pipeline stage).
using ChooseLayers = std::function<Result<LayerRange>(const GgufFile& file)>;

// Opens and validates a GGUF model and its tokenizer; errors name the file and the problem.
// With `choose`, only the layers it picks are bound (see Model::load).
Result<LoadedModel> load_model(const std::string& path, const ChooseLayers& choose = {});

struct KvPoolSize {
  int32_t n_blocks = 0;
  int32_t n_pages = 0;  // window pages (layouts with windowed layers)
  int32_t n_ctx = 0;    // the context, shortened when the pool is smaller than one context + block
};

// Window pages wanted: pages_per_seq for each of max_seqs running requests (at least one's).
struct WindowPageNeed {
  int32_t pages_per_seq = 0;  // 0: no windowed layers
  int32_t max_seqs = 1;
};

// The pool holds kv_bytes of blocks, else kv_tokens tokens, else (both 0) four contexts (and at
// least one context plus one block). One request must always fit once the cache is evicted: its
// blocks plus, in TOKEN mode, the cached block its first fresh block is copied from; hence a pool
// of n blocks allows a context of at most (n - 1) * block_size tokens. With windowed layers the
// pages wanted come first out of kv_bytes (up to half of it and what leaves the blocks a context,
// but never fewer than one request's), the blocks (the other layers) take the rest.
Result<KvPoolSize> size_kv_pool(const KvLayout& layout, int32_t n_ctx, int64_t kv_bytes,
                                int64_t kv_tokens, WindowPageNeed pages = {});

// The KV memory, its block pool, the window pages and the prefix cache over them.
struct KvRuntime {
  std::unique_ptr<KvStorage> kv;
  std::unique_ptr<BlockPool> blocks;
  std::unique_ptr<WindowPages> pages;  // null without windowed layers
  std::unique_ptr<PrefixCache> cache;  // declared last: destroyed before what it points to
  int32_t n_ctx = 0;                   // the context after sizing the pool (see size_kv_pool)
};

// Whether sliding-window layers keep their window only, and what sizes their pages.
struct KvWindowing {
  // false: every layer keeps the whole context (--swa-full; the disk tier and a pipeline need it).
  bool windows_only = true;
  int32_t max_step_tokens = 1;  // the scheduler's max_batch_tokens
  int32_t max_seqs = 1;
};

// Sizes and allocates the KV runtime for `model`; n_ctx 0 means the model's training context.
// A model with a sliding window keeps its local layers' KV in window pages (unless
// windowing.windows_only is false).
Result<KvRuntime> create_kv_runtime(const Model& model, int32_t block_size, KvTypes kv_types,
                                    int32_t n_ctx, int64_t kv_bytes, int64_t kv_tokens,
                                    const PrefixCacheConfig& prefix_cache,
                                    const KvWindowing& windowing = {});
// The same for blocks of `layout` (this process's layers), the budget counting n_layer_total
// layers (all of the model's, wherever they are held); n_ctx must be positive. `window` says the
// window of layout.windowed's layers and max_step_tokens (its pages are made here).
Result<KvRuntime> create_kv_runtime(const KvLayout& layout, int64_t n_layer_total, int32_t n_ctx,
                                    int64_t kv_bytes, int64_t kv_tokens,
                                    const PrefixCacheConfig& prefix_cache, WindowPolicy window = {},
                                    int32_t max_seqs = 1);

}  // namespace trellis
