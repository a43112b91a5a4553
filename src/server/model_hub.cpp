#include "server/model_hub.h"

#include <algorithm>
#include <ctime>
#include <nlohmann/json.hpp>

#include "server/json_fields.h"
#include "server/labelled_metrics.h"
#include "server/metrics.h"
#include "server/openai_protocol.h"
#include "server/embedding_service.h"
#include "server/openai_service.h"

namespace trellis {

struct ModelHub::Slot {
  enum class State { UNLOADED, LOADING, READY, FAILED };

  HubModel model;
  State state = State::UNLOADED;
  std::unique_ptr<ServedModel> loaded;  // while READY
  ApiError failure = server_error("");  // why the last load failed (while FAILED)
  int32_t users = 0;                    // requests holding the model
  int32_t waiters = 0;                  // requests waiting for it to load
  uint64_t last_use = 0;                // use_clock_ when last acquired or loaded
  std::chrono::steady_clock::time_point idle_since;  // when its last user let go (or it loaded)
};

// One request's hold on a loaded model: while it lives, the model stays loaded.
struct ModelHub::Use {
  // Needs mutex_, with slot.users already counting this use.
  Use(ModelHub& h, Slot& s) : hub(h), slot(s), api(*s.loaded->api), endpoints(s.loaded->endpoints) {}
  Use(const Use&) = delete;
  Use& operator=(const Use&) = delete;
  ~Use() { hub.release(slot); }

  ModelHub& hub;
  Slot& slot;
  HttpApi& api;
  std::span<const ApiEndpoint> endpoints;
};

namespace {

// Counts a generation request from its start to its end (a stream's last event).
struct Counted {
  std::atomic<int32_t>& count;
  explicit Counted(std::atomic<int32_t>& n) : count(n) { ++count; }
  ~Counted() { --count; }
};

ApiResponse hub_json(int status, const nlohmann::json& body) {
  return ApiResponse{status, "application/json", body.dump(), {}};
}

const ApiEndpoint* same_route(std::span<const ApiEndpoint> endpoints, const ApiEndpoint& wanted) {
  for (const ApiEndpoint& endpoint : endpoints)
    if (endpoint.path == wanted.path && endpoint.method == wanted.method) return &endpoint;
  return nullptr;
}

constexpr std::string_view kHealthPath = "/health";
constexpr std::string_view kMetricsPath = "/metrics";
constexpr std::string_view kModelsPath = "/v1/models";

}  // namespace

std::span<const ApiEndpoint> ModelHub::endpoints() {
  // The union of the services' routes (so that a route either gains is the hub's too), each
  // numbered by its place here.
  static const std::vector<ApiEndpoint> table = [] {
    std::vector<ApiEndpoint> all;
    for (std::span<const ApiEndpoint> routes :
         {OpenAiService::endpoints(), EmbeddingService::endpoints()}) {
      for (const ApiEndpoint& route : routes) {
        if (same_route(all, route) != nullptr) continue;
        ApiEndpoint copy = route;
        copy.id = static_cast<int>(all.size());
        all.push_back(copy);
      }
    }
    return all;
  }();
  return table;
}

ModelHub::ModelHub(std::vector<HubModel> models, ModelLoader loader, HubOptions options)
    : loader_(std::move(loader)), options_(std::move(options)), created_(std::time(nullptr)) {
  for (HubModel& model : models) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->model = std::move(model);
  }
  loader_thread_ = std::thread([this] { loader_loop(); });
}

ModelHub::~ModelHub() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  loader_thread_.join();
}

ApiResponse ModelHub::serve(const ApiEndpoint& endpoint, std::string_view body,
                            std::string_view api_key, std::shared_ptr<ClientPresence> client) {
  // The hub answers these itself; every other route belongs to a model.
  if (endpoint.path == kHealthPath) return health();
  if (endpoint.path == kMetricsPath) return metrics();
  if (endpoint.path == kModelsPath) return models();
  return forward(endpoint, body, api_key, std::move(client));
}

void ModelHub::begin_shutdown() {
  shutting_down_ = true;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::unique_ptr<Slot>& slot : slots_)
    if (slot->state == Slot::State::READY) slot->loaded->api->begin_shutdown();
  changed_.notify_all();
}

std::vector<std::string> ModelHub::loaded_models() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<const Slot*> loaded;
  for (const std::unique_ptr<Slot>& slot : slots_)
    if (slot->state == Slot::State::READY) loaded.push_back(slot.get());
  std::sort(loaded.begin(), loaded.end(),
            [](const Slot* a, const Slot* b) { return a->last_use < b->last_use; });
  std::vector<std::string> names;
  for (const Slot* slot : loaded) names.push_back(slot->model.name);
  return names;
}

ApiResponse ModelHub::forward(const ApiEndpoint& endpoint, std::string_view body,
                              std::string_view api_key, std::shared_ptr<ClientPresence> client) {
  std::shared_ptr<Counted> counted;
  if (endpoint.generation) counted = std::make_shared<Counted>(in_flight_);
  if (shutting_down_)
    return OpenAiService::error_response(server_error("the server is shutting down", 503));
  ApiResult<Slot*> slot = find_model(body);
  if (!slot.ok()) return OpenAiService::error_response(slot.error());
  ApiResult<std::shared_ptr<Use>> use = acquire(**slot);
  if (!use.ok()) return OpenAiService::error_response(use.error());
  const ApiEndpoint* target = same_route((*use)->endpoints, endpoint);
  if (target == nullptr) {
    const std::string& kind = (*slot)->loaded->kind;
    return OpenAiService::error_response(invalid_request_error(
        "the model `" + (*slot)->model.name + "` is " +
            (kind == "embedding" ? "an embedding" : "a " + kind) + " model: it does not serve " +
            std::string(endpoint.path),
        "model"));
  }
  ApiResponse response = (*use)->api.serve(*target, body, api_key, std::move(client));
  if (response.stream) {
    // The stream runs after serve() returns: it holds the model (and the count) until it ends.
    response.stream = [inner = std::move(response.stream), hold = *use,
                       counted](const StreamWriter& write) { inner(write); };
  }
  return response;
}

ApiResult<ModelHub::Slot*> ModelHub::find_model(std::string_view body) const {
  ApiResult<OrderedJson> parsed = parse_body(body, ProtocolLimits{}.max_json_depth);
  if (!parsed.ok()) return parsed.error();
  const auto field = parsed->find("model");
  if (field == parsed->end() || field->is_null()) {
    if (slots_.size() == 1) return slots_.front().get();
    return invalid_request_error("model is required: this server serves " + model_names(),
                                 "model");
  }
  if (!field->is_string())
    return invalid_request_error("model must be a string, not " + a_type(*field), "model");
  const std::string name = field->get<std::string>();
  for (const std::unique_ptr<Slot>& slot : slots_)
    if (slot->model.name == name) return slot.get();
  return not_found_error("The model `" + name + "` does not exist; this server serves " +
                             model_names(),
                         "model_not_found");
}

std::string ModelHub::model_names() const {
  std::string names;
  for (const std::unique_ptr<Slot>& slot : slots_)
    names += (names.empty() ? "`" : ", `") + slot->model.name + "`";
  return names;
}

ApiResult<std::shared_ptr<ModelHub::Use>> ModelHub::acquire(Slot& slot) {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() + options_.load_wait;
  bool asked = false;  // this request saw a load of its own start (its failure is an answer)
  ++slot.waiters;
  struct Leave {
    Slot& slot;
    ~Leave() { --slot.waiters; }
  } leave{slot};
  while (true) {
    if (stopping_ || shutting_down_) return server_error("the server is shutting down", 503);
    if (slot.state == Slot::State::READY) {
      ++slot.users;
      slot.last_use = ++use_clock_;
      return std::make_shared<Use>(*this, slot);
    }
    if (slot.state == Slot::State::FAILED && asked) return slot.failure;
    if (slot.state != Slot::State::LOADING) {
      slot.state = Slot::State::LOADING;
      load_queue_.push_back(&slot);
      changed_.notify_all();
    }
    asked = true;
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout &&
        slot.state == Slot::State::LOADING) {
      changed_.notify_all();  // the loader may be waiting for this request
      return server_error("the model `" + slot.model.name +
                              "` is still loading (or waiting for room to load); retry later",
                          503);
    }
  }
}

void ModelHub::release(Slot& slot) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--slot.users == 0) slot.idle_since = std::chrono::steady_clock::now();
  }
  changed_.notify_all();
}

bool ModelHub::fits(const Slot& adding) const {
  int32_t n_loaded = 0;
  int64_t bytes = 0;
  for (const std::unique_ptr<Slot>& slot : slots_) {
    if (slot->state != Slot::State::READY || slot.get() == &adding) continue;
    ++n_loaded;
    bytes += slot->model.expected_bytes;
  }
  ++n_loaded;
  bytes += adding.model.expected_bytes;
  return (options_.max_loaded <= 0 || n_loaded <= options_.max_loaded) &&
         (options_.max_memory_bytes <= 0 || bytes <= options_.max_memory_bytes);
}

bool ModelHub::make_room(const Slot& adding) {
  while (!fits(adding)) {
    Slot* victim = nullptr;
    for (const std::unique_ptr<Slot>& slot : slots_) {
      if (slot.get() == &adding || slot->state != Slot::State::READY || slot->users > 0 ||
          slot->waiters > 0)
        continue;
      if (victim == nullptr || slot->last_use < victim->last_use) victim = slot.get();
    }
    if (victim == nullptr) return false;
    unload(*victim, "least recently used");
  }
  return true;
}

void ModelHub::unload(Slot& slot, const char* why) {
  std::unique_ptr<ServedModel> loaded = std::move(slot.loaded);
  slot.state = Slot::State::UNLOADED;
  ++n_unloads_;
  if (options_.on_unload) options_.on_unload(slot.model, why);
  // Nothing holds it (no users): its engine stops and its memory returns here, under the lock, so
  // that the budget is true before the next load starts.
  loaded->api->begin_shutdown();
  loaded.reset();
}

std::chrono::steady_clock::time_point ModelHub::unload_idle() {
  using Clock = std::chrono::steady_clock;
  Clock::time_point next = Clock::time_point::max();
  if (options_.keep_alive.count() <= 0) return next;
  const Clock::time_point now = Clock::now();
  for (const std::unique_ptr<Slot>& slot : slots_) {
    if (slot->state != Slot::State::READY || slot->users > 0 || slot->waiters > 0) continue;
    const Clock::time_point due = slot->idle_since + options_.keep_alive;
    if (due <= now) {
      unload(*slot, "idle");
    } else {
      next = std::min(next, due);
    }
  }
  return next;
}

void ModelHub::loader_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (load_queue_.empty()) {
      const auto next_idle = unload_idle();
      if (next_idle == std::chrono::steady_clock::time_point::max()) {
        changed_.wait(lock);
      } else {
        changed_.wait_until(lock, next_idle);
      }
      continue;
    }
    Slot& slot = *load_queue_.front();
    if (slot.waiters == 0) {  // every request for it gave up
      slot.state = Slot::State::UNLOADED;
      load_queue_.pop_front();
      continue;
    }
    const bool alone_too_big =
        options_.max_memory_bytes > 0 && slot.model.expected_bytes > options_.max_memory_bytes;
    if (alone_too_big) {
      slot.state = Slot::State::FAILED;
      slot.failure = server_error("the model `" + slot.model.name + "` needs " +
                                      std::to_string(slot.model.expected_bytes >> 20) +
                                      " MiB, more than the server's model memory (" +
                                      std::to_string(options_.max_memory_bytes >> 20) + " MiB)",
                                  503);
      load_queue_.pop_front();
      changed_.notify_all();
      continue;
    }
    if (!make_room(slot)) {  // busy models are in the way: wait for one to be released
      changed_.wait(lock);
      continue;
    }
    load_queue_.pop_front();
    const HubModel model = slot.model;
    lock.unlock();
    Result<ServedModel> loaded = loader_(model);
    lock.lock();
    if (loaded.ok()) {
      slot.loaded = std::make_unique<ServedModel>(std::move(loaded).value());
      slot.model.expected_bytes = slot.loaded->memory_bytes;
      slot.state = Slot::State::READY;
      slot.last_use = ++use_clock_;
      slot.idle_since = std::chrono::steady_clock::now();
      ++n_loads_;
      if (shutting_down_) slot.loaded->api->begin_shutdown();
      make_room(slot);  // the model may hold more than expected: others make way if they can
    } else {
      slot.state = Slot::State::FAILED;
      slot.failure = server_error(
          "the model `" + slot.model.name + "` failed to load: " + loaded.error().message, 500);
      ++n_load_failures_;
    }
    changed_.notify_all();
  }
}

ApiResponse ModelHub::models() const {
  OrderedJson data = OrderedJson::array();
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::unique_ptr<Slot>& slot : slots_) {
    const bool loaded = slot->state == Slot::State::READY;
    data.push_back({{"id", slot->model.name},
                    {"object", "model"},
                    {"created", created_},
                    {"owned_by", "trellis"},
                    {"kind", loaded ? slot->loaded->kind : slot->model.kind},
                    {"loaded", loaded}});
  }
  return ApiResponse{200, "application/json", OrderedJson{{"object", "list"}, {"data", data}}.dump(),
                     {}};
}

ApiResponse ModelHub::health() const {
  if (shutting_down_) return hub_json(503, {{"status", "shutting down"}});
  const size_t n_loaded = loaded_models().size();
  return hub_json(200, {{"status", "ok"}, {"models", slots_.size()}, {"loaded", n_loaded}});
}

ApiResponse ModelHub::metrics() {
  // Each loaded model's own figures, read while a Use holds it.
  std::vector<std::shared_ptr<Use>> uses;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::unique_ptr<Slot>& slot : slots_) {
      if (slot->state != Slot::State::READY) continue;
      ++slot->users;
      uses.push_back(std::make_shared<Use>(*this, *slot));
    }
  }
  MetricsWriter own;
  own.gauge("models", "Models this server serves", static_cast<double>(slots_.size()));
  own.gauge("models_loaded", "Models loaded now", static_cast<double>(uses.size()));
  own.counter("model_loads_total", "Models loaded since start", static_cast<double>(n_loads_));
  own.counter("model_unloads_total", "Models unloaded to make room or after keep-alive",
              static_cast<double>(n_unloads_));
  own.counter("model_load_failures_total", "Loads that failed",
              static_cast<double>(n_load_failures_));
  own.family("model_memory_bytes", "A loaded model's weights and KV pool", MetricType::GAUGE);
  std::vector<std::pair<std::string, std::string>> per_model;
  for (const std::shared_ptr<Use>& use : uses) {
    own.sample({{"model", use->slot.model.name}},
               static_cast<double>(use->slot.model.expected_bytes));
    const ApiEndpoint* route =
        same_route(use->endpoints, ApiEndpoint{ApiMethod::GET, kMetricsPath, 0, false, false, false});
    if (route == nullptr) continue;
    per_model.emplace_back(use->slot.model.name, use->api.serve(*route, "", "", nullptr).body);
  }
  return ApiResponse{200, "text/plain; version=0.0.4",
                     own.text() + merge_labelled_metrics("model", per_model), {}};
}

}  // namespace trellis
