// Several models behind one server: an HttpApi over named models that routes each request to the
// API of the model its body names (an OpenAiService on an engine, or an EmbeddingService), loading
// models on first use and unloading the least recently used ones to stay within a count and a
// memory budget.
//
//   GET  /v1/models    every model, loaded or not ("loaded": true|false)
//   GET  /health       the hub's state (ok with any number of models loaded)
//   GET  /metrics      the hub's own families, then each loaded model's, labelled model="NAME"
//   POST everything else: forwarded to the named model's API (404 naming the models there are
//        for an unknown one; a request without "model" goes to the only model, if there is one)
//
// Loading happens on one loader thread, one model at a time: a request for a model that is not
// loaded waits for it up to HubOptions::load_wait (then 503), and requests to other models go on
// meanwhile. A model is never unloaded while a request holds it (a stream holds it until its last
// event); when the budget needs a model that is busy, the load waits for it to be released. A file
// that fails to load is an error for the requests that asked for it only; the next request tries
// again. With HubOptions::keep_alive, a model left unused that long is unloaded.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "server/api_error.h"
#include "server/http_api.h"

namespace trellis {

// One model the hub may serve.
struct HubModel {
  std::string name;  // its id in the API
  std::string path;  // its GGUF file
  // The memory it is expected to hold once loaded (weights and KV pool), for the budget; the
  // figure the loader reports replaces it after a load.
  int64_t expected_bytes = 0;
  // "generation", "embedding" or "rerank" as far as known before loading (empty: not known);
  // /v1/models lists it, so that clients (the chat page) can tell what a model is for.
  std::string kind;
};

// A model loaded and ready: its API and what that API works on.
struct ServedModel {
  std::shared_ptr<void> owner;  // the engine or embedder (declared first: destroyed after api)
  std::unique_ptr<HttpApi> api;
  std::span<const ApiEndpoint> endpoints;  // api's routes (ApiEndpoint::id is api's own)
  int64_t memory_bytes = 0;                // weights and KV pool, as loaded
  std::string kind;                        // "generation", "embedding" or "rerank"
};

// Loads one model (the API's model id is model.name). Runs on the hub's loader thread.
using ModelLoader = std::function<Result<ServedModel>(const HubModel& model)>;

struct HubOptions {
  int32_t max_loaded = 0;        // models loaded at once; 0: no limit
  int64_t max_memory_bytes = 0;  // their expected bytes together; 0: no limit
  // How long a request waits for its model to load (or for room to load it) before a 503.
  std::chrono::milliseconds load_wait{std::chrono::minutes(5)};
  // A model no request has used for this long is unloaded (Ollama's keep_alive); 0: kept until
  // its room is needed.
  std::chrono::milliseconds keep_alive{0};
  // Told of each model unloaded (for the log), with why ("least recently used", "idle"); runs
  // with the hub's lock held.
  std::function<void(const HubModel&, const char* why)> on_unload;
};

class ModelHub : public HttpApi {
 public:
  // The union of the generation and embedding APIs' routes (ApiEndpoint::id: the place in it).
  static std::span<const ApiEndpoint> endpoints();

  // `models`: distinct names (checked by the caller). Starts the loader thread.
  ModelHub(std::vector<HubModel> models, ModelLoader loader, HubOptions options);
  ~ModelHub() override;
  ModelHub(const ModelHub&) = delete;
  ModelHub& operator=(const ModelHub&) = delete;

  ApiResponse serve(const ApiEndpoint& endpoint, std::string_view body, std::string_view api_key,
                    std::shared_ptr<ClientPresence> client) override;
  int32_t n_in_flight() const override { return in_flight_.load(); }
  void begin_shutdown() override;

  // The names of the models loaded now, least recently used first.
  std::vector<std::string> loaded_models() const;
  int64_t n_loads() const { return n_loads_.load(); }
  int64_t n_unloads() const { return n_unloads_.load(); }

 private:
  struct Slot;
  struct Use;

  ApiResponse models() const;
  ApiResponse health() const;
  ApiResponse metrics();
  ApiResponse forward(const ApiEndpoint& endpoint, std::string_view body,
                      std::string_view api_key, std::shared_ptr<ClientPresence> client);
  // The slot the request's "model" names, or the error to answer with.
  ApiResult<Slot*> find_model(std::string_view body) const;
  // Holds `slot`'s model for one request, loading it first when needed.
  ApiResult<std::shared_ptr<Use>> acquire(Slot& slot);
  void release(Slot& slot);
  std::string model_names() const;

  void loader_loop();
  // Unloads idle models, least recently used first, until `slot` fits; false when it cannot yet
  // (busy models are in the way). Needs mutex_.
  bool make_room(const Slot& slot);
  bool fits(const Slot& adding) const;
  void unload(Slot& slot, const char* why);  // needs mutex_
  // Unloads the models idle for keep_alive; returns when the next one would be (max when none).
  // Needs mutex_.
  std::chrono::steady_clock::time_point unload_idle();

  std::vector<std::unique_ptr<Slot>> slots_;
  ModelLoader loader_;
  HubOptions options_;
  int64_t created_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable changed_;  // a load ended, a model was released, or shutdown
  std::deque<Slot*> load_queue_;     // guarded by mutex_
  uint64_t use_clock_ = 0;           // guarded by mutex_; orders the models' last uses
  bool stopping_ = false;            // guarded by mutex_
  std::atomic<bool> shutting_down_{false};
  std::atomic<int32_t> in_flight_{0};
  std::atomic<int64_t> n_loads_{0};
  std::atomic<int64_t> n_unloads_{0};
  std::atomic<int64_t> n_load_failures_{0};
  std::thread loader_thread_;
};

}  // namespace trellis
