#include "kvdisk/disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace trellis {
namespace fs = std::filesystem;

namespace {

// Writes all of `bytes` to fd (write(2) may write less than asked).
bool write_all(int fd, std::span<const uint8_t> bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes = bytes.subspan(static_cast<size_t>(n));
  }
  return true;
}

bool read_all(int fd, std::span<uint8_t> bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::read(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes = bytes.subspan(static_cast<size_t>(n));
  }
  return true;
}

// A block key from a file name "<64 hex>.blk"; false for anything else.
bool key_from_name(const std::string& name, BlockKey& key) {
  if (name.size() != 68 || name.substr(64) != ".blk") return false;
  for (size_t i = 0; i < 32; ++i) {
    int v = 0;
    for (size_t k = 0; k < 2; ++k) {
      const char c = name[2 * i + k];
      int d = 0;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else
        return false;
      v = v * 16 + d;
    }
    key[i] = static_cast<uint8_t>(v);
  }
  return true;
}

// The value of "key=value" in a tier's identity file (TierIdentity::describe); empty if absent.
std::string identity_field(const fs::path& file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 &&
        line[key.size()] == '=')
      return line.substr(key.size() + 1);
  }
  return "";
}

int64_t mtime_ns(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

Result<std::unique_ptr<DiskTier>> DiskTier::open(DiskTierConfig config) {
  std::unique_ptr<DiskTier> tier(new DiskTier());
  TRELLIS_TRY(tier->init(std::move(config)));
  tier->writer_ = std::thread([t = tier.get()] { t->writer_loop(); });
  return tier;
}

Status DiskTier::init(DiskTierConfig config) {
  config_ = std::move(config);
  const TierIdentity& id = config_.identity;
  if (id.block_size <= 0 || id.block_bytes == 0)
    return Error{"disk tier: the block size and block bytes must be positive"};
  geometry_ = RecordGeometry{id.digest(), id.block_size, id.block_bytes};
  const auto record_bytes = static_cast<int64_t>(geometry_.file_bytes());
  if (config_.budget_bytes < record_bytes) {
    return Error{"--cache-disk " + std::to_string(config_.budget_bytes) +
                 " bytes is smaller than one KV block on disk (" + std::to_string(record_bytes) +
                 " bytes)"};
  }
  max_blocks_ = config_.budget_bytes / record_bytes;
  Result<DirLock> lock = DirLock::acquire(config_.dir);
  if (!lock.ok()) return lock.error();
  lock_ = std::move(lock).value();

  tier_dir_ = config_.dir + "/" + id.directory_name();
  blocks_dir_ = tier_dir_ + "/blocks";
  tmp_dir_ = tier_dir_ + "/tmp";
  std::error_code ec;
  fs::create_directories(blocks_dir_, ec);
  if (!ec) fs::create_directories(tmp_dir_, ec);
  if (ec) return Error{"cache dir " + config_.dir + ": " + ec.message()};
  // Records a crash left half-written: never indexed, so never read.
  for (const auto& entry : fs::directory_iterator(tmp_dir_, ec)) fs::remove(entry.path(), ec);
  {
    std::ofstream out(tier_dir_ + "/identity", std::ios::trunc);
    out << id.describe();
  }
  int n_foreign = 0;
  for (const auto& entry : fs::directory_iterator(config_.dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind("tier-", 0) != 0 || name == id.directory_name())
      continue;
    // A tier of this model in another KV type is named: the user may have meant to use it.
    const std::string its_type = identity_field(entry.path() / "identity", "kv_type");
    if (identity_field(entry.path() / "identity", "model_sha256") == id.model_sha256 &&
        !its_type.empty() && its_type != id.kv_type) {
      log("cache dir " + config_.dir + ": a tier of this model written with KV type " + its_type +
          " is not used: this run's KV type is " + id.kv_type);
    } else {
      ++n_foreign;
    }
  }
  if (n_foreign > 0) {
    log("cache dir " + config_.dir + ": ignoring " + std::to_string(n_foreign) +
        " tier(s) of another model file, KV type, block size, architecture or format version");
  }
  blocks_dir_fd_ = ::open(blocks_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (blocks_dir_fd_ < 0) return Error{"cache dir " + config_.dir + ": cannot open " + blocks_dir_};
  load_index();
  return {};
}

DiskTier::~DiskTier() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  queue_changed_.notify_all();
  if (writer_.joinable()) writer_.join();
  if (blocks_dir_fd_ >= 0) ::close(blocks_dir_fd_);
}

void DiskTier::log(const std::string& line) const {
  if (config_.log) {
    config_.log(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

std::string DiskTier::block_path(const BlockKey& key) const {
  return blocks_dir_ + "/" + block_key_hex(key) + ".blk";
}

// Rebuilds the index from blocks/: each file's size and header are checked (the checksum is
// checked when the block is read), then the survivors are ordered by modification time.
void DiskTier::load_index() {
  struct Found {
    int64_t mtime = 0;
    BlockKey key{};
    BlockKey parent{};
  };
  std::vector<Found> found;
  int64_t n_bad = 0;
  std::error_code ec;
  std::vector<uint8_t> header(RecordGeometry::kHeaderBytes);
  for (const auto& entry : fs::directory_iterator(blocks_dir_, ec)) {
    const std::string path = entry.path().string();
    BlockKey key{};
    struct stat st {};
    bool good = key_from_name(entry.path().filename().string(), key) &&
                ::stat(path.c_str(), &st) == 0 &&
                static_cast<uint64_t>(st.st_size) == geometry_.file_bytes();
    BlockKey parent{};
    if (good) {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      good = fd >= 0 && read_all(fd, header);
      if (fd >= 0) ::close(fd);
      if (good) {
        Result<RecordHeader> h = decode_record_header(header, geometry_);
        good = h.ok() && h->key == key;
        if (good) parent = h->parent;
      }
    }
    if (!good) {
      ++n_bad;
      fs::remove(entry.path(), ec);
      continue;
    }
    found.push_back(Found{mtime_ns(st), key, parent});
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return a.mtime != b.mtime ? a.mtime < b.mtime : a.key < b.key;
  });
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Found& f : found) {
    lru_.push_back(f.key);
    index_[f.key] = Entry{std::prev(lru_.end()), f.parent};
    children_.emplace(f.parent, f.key);
  }
  prune_orphans();
  std::vector<BlockKey> victims;
  evict_over_budget_locked(victims);  // the budget may have shrunk since the last run
  for (const BlockKey& key : victims) fs::remove(block_path(key), ec);
  stats_.n_corrupt_dropped += n_bad;
  if (n_bad > 0) {
    log("cache dir " + config_.dir + ": dropped " + std::to_string(n_bad) +
        " truncated or malformed block file(s)");
  }
}

// Drops records whose parent is not indexed: lookups walk from block 0, so they are unreachable.
// Repeats until stable (a dropped record orphans its children). Caller holds mutex_.
void DiskTier::prune_orphans() {
  std::error_code ec;
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = index_.begin(); it != index_.end();) {
      if (it->second.parent != kRootBlockKey && !index_.contains(it->second.parent)) {
        fs::remove(block_path(it->first), ec);
        unlink_child_locked(it->second.parent, it->first);
        lru_.erase(it->second.lru);
        it = index_.erase(it);
        changed = true;
      } else {
        ++it;
      }
    }
  }
}

bool DiskTier::contains(const BlockKey& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return index_.contains(key) || queued_.contains(key);
}

bool DiskTier::write_async(BlockRecord record) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (index_.contains(record.key) || queued_.contains(record.key)) return false;
    const auto pending_bytes =
        static_cast<int64_t>(queue_.size() + 1) * static_cast<int64_t>(geometry_.file_bytes());
    if (pending_bytes > config_.max_pending_bytes) {
      ++stats_.n_writes_dropped;
      return false;
    }
    queued_.insert(record.key);
    queue_.push_back(std::move(record));
  }
  queue_changed_.notify_all();
  return true;
}

void DiskTier::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  // A refusing disk is not waited out: what is queued stays queued for the retries.
  queue_changed_.wait(lock, [&] { return (queue_.empty() && !writing_) || failing_since_ > 0; });
}

void DiskTier::writer_loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queue_changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, with everything written
      writing_record_ = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
    }
    // Readers may copy writing_record_ meanwhile (under the mutex): here it is only read.
    const BlockRecord& record = writing_record_;
    const int error = write_record(record);
    std::vector<BlockKey> victims;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (error == 0) {
        queued_.erase(record.key);
        index_locked(record.key, record.parent);
        evict_over_budget_locked(victims);
        if (failing_since_ > 0) {
          log_write_recovery_locked();
          failing_since_ = 0;
        }
      } else {
        ++stats_.n_write_errors;
        if (failing_since_++ == 0) {
          queue_changed_.notify_all();  // wait_idle() stops waiting on a refusing disk
          log("cache dir " + config_.dir + ": cannot write a block (" + std::strerror(error) +
              "); the tier keeps what waits in memory and tries again every " +
              std::to_string(config_.write_retry.count()) + " ms");
        }
        if (!stopping_) {
          // The same record first, after a pause: a full disk may get room again (an operator
          // frees some, or this tier's own evictions). Meanwhile the queue fills up to
          // max_pending_bytes and further blocks are dropped (counted), never waited for.
          queue_.push_front(std::move(writing_record_));
          writing_ = false;
          writing_record_ = BlockRecord{};
          queue_changed_.wait_for(lock, config_.write_retry, [&] { return stopping_; });
          continue;
        }
        queued_.erase(record.key);  // stopping: given up
      }
      writing_ = false;
      writing_record_ = BlockRecord{};
    }
    std::error_code ec;
    for (const BlockKey& key : victims) fs::remove(block_path(key), ec);
    queue_changed_.notify_all();
  }
}

void DiskTier::log_write_recovery_locked() {
  log("cache dir " + config_.dir + ": blocks are written again (after " +
      std::to_string(failing_since_) + " failed attempt(s))");
}

// tmp file, fsync, rename into blocks/, fsync blocks/: the rename makes the record visible only
// once its bytes are durable, and the directory sync makes the rename itself durable.
int DiskTier::write_record(const BlockRecord& record) {
  const std::vector<uint8_t> bytes = encode_block_record(record, geometry_);
  const std::string name = block_key_hex(record.key) + ".blk";
  const std::string tmp = tmp_dir_ + "/" + name;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  int error = 0;
  auto check = [&error](bool ok) {
    if (!ok && error == 0) error = errno != 0 ? errno : EIO;
  };
  errno = 0;
  check(write_all(fd, bytes));
  if (error == 0) check(::fdatasync(fd) == 0);
  check(::close(fd) == 0);
  if (error == 0) check(::rename(tmp.c_str(), (blocks_dir_ + "/" + name).c_str()) == 0);
  if (error == 0) check(::fsync(blocks_dir_fd_) == 0);
  if (error != 0) {
    std::error_code ec;
    fs::remove(tmp, ec);
    return error;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.n_blocks_written;
  stats_.n_bytes_written += static_cast<int64_t>(bytes.size());
  return 0;
}

void DiskTier::index_locked(const BlockKey& key, const BlockKey& parent) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    lru_.splice(lru_.end(), lru_, it->second.lru);
    return;
  }
  lru_.push_back(key);
  index_[key] = Entry{std::prev(lru_.end()), parent};
  children_.emplace(parent, key);
}

void DiskTier::evict_over_budget_locked(std::vector<BlockKey>& victims) {
  while (static_cast<int64_t>(index_.size()) > max_blocks_) {
    const size_t before = victims.size();
    drop_locked(lru_.front(), victims);
    stats_.n_blocks_evicted += static_cast<int64_t>(victims.size() - before);
  }
}

// Drops `key` and every indexed block below it: lookups walk from block 0, so a block whose
// parent is gone can never be read again and would only hold budget. Appends them to `dropped`.
void DiskTier::drop_locked(const BlockKey& key, std::vector<BlockKey>& dropped) {
  std::vector<BlockKey> pending = {key};
  while (!pending.empty()) {
    const BlockKey k = pending.back();
    pending.pop_back();
    auto it = index_.find(k);
    if (it == index_.end()) continue;
    auto [first, last] = children_.equal_range(k);
    for (auto c = first; c != last; ++c) pending.push_back(c->second);
    children_.erase(k);
    unlink_child_locked(it->second.parent, k);
    lru_.erase(it->second.lru);
    index_.erase(it);
    dropped.push_back(k);
  }
}

void DiskTier::unlink_child_locked(const BlockKey& parent, const BlockKey& child) {
  auto [first, last] = children_.equal_range(parent);
  for (auto c = first; c != last; ++c) {
    if (c->second == child) {
      children_.erase(c);
      return;
    }
  }
}

// Most recently used now, in memory and (through the file's time) across restarts.
void DiskTier::touch(const BlockKey& key) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = index_.find(key);
    if (it == index_.end()) return;
    lru_.splice(lru_.end(), lru_, it->second.lru);
  }
  ::utimensat(AT_FDCWD, block_path(key).c_str(), nullptr, 0);
}

Result<BlockRecord> DiskTier::read_record_into(const BlockKey& key, uint8_t* kv) {
  const std::string path = block_path(key);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{"missing"};  // evicted meanwhile
  // The whole file goes into one buffer per thread, reused from record to record, and is checked
  // there; only then is its K/V copied into `kv`. Why not read() straight into `kv`: the kernel's
  // first write into pages the process has not had the kernel write before can be several times
  // slower than a copy (it is under some hypervisors: 47 blocks took 50-66 ms straight and 11-14 ms
  // through a reused buffer), and the checksum then reads bytes that are still in cache.
  thread_local std::vector<uint8_t> buffer;
  const size_t file_bytes = geometry_.file_bytes();
  if (buffer.size() < file_bytes) buffer.resize(file_bytes);
  const std::span<uint8_t> bytes(buffer.data(), file_bytes);
  struct stat st {};
  const bool whole = ::fstat(fd, &st) == 0 && static_cast<uint64_t>(st.st_size) == file_bytes &&
                     read_all(fd, bytes);
  ::close(fd);
  if (!whole) return Error{"record of the wrong size"};
  const size_t kv_offset = geometry_.kv_offset();
  Result<BlockRecord> record =
      decode_record_parts(bytes.first(kv_offset), bytes.subspan(kv_offset, geometry_.kv_bytes),
                          bytes.subspan(kv_offset + geometry_.kv_bytes), geometry_);
  if (record.ok()) {
    std::memcpy(kv, bytes.data() + kv_offset, geometry_.kv_bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.n_blocks_read;
    stats_.n_bytes_read += static_cast<int64_t>(file_bytes);
  }
  return record;
}

int32_t DiskTier::longest_partial(const BlockKey& parent, const NamespaceDigest& ns,
                                  std::span<const TokenId> tokens) const {
  const size_t n = std::min(tokens.size(), static_cast<size_t>(geometry_.block_size - 1));
  const std::vector<BlockKey> keys = partial_block_keys(parent, ns, tokens.first(n));
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t k = n; k > 0; --k) {
    if (index_.contains(keys[k - 1]) || queued_.contains(keys[k - 1]))
      return static_cast<int32_t>(k);
  }
  return 0;
}

const BlockRecord* DiskTier::pending_locked(const BlockKey& key) const {
  if (!queued_.contains(key)) return nullptr;
  if (writing_ && writing_record_.key == key) return &writing_record_;
  for (const BlockRecord& r : queue_) {
    if (r.key == key) return &r;
  }
  return nullptr;
}

DiskTier::ChainStep DiskTier::read_block(const BlockKey& key, const BlockKey& parent,
                                         const NamespaceDigest& ns,
                                         std::span<const TokenId> block_tokens, uint8_t* kv) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!index_.contains(key)) {
      // Not durable yet: the bytes waiting for the writer serve as well (they are what will be
      // written), so a block evicted a moment ago is not recomputed for want of an fsync.
      const BlockRecord* pending = pending_locked(key);
      if (pending == nullptr) return ChainStep::MISSING;
      std::memcpy(kv, pending->kv.data(), geometry_.kv_bytes);
      ++stats_.n_blocks_read_pending;
      return ChainStep::READ;
    }
  }
  Result<BlockRecord> record = read_record_into(key, kv);
  const bool valid = record.ok() && record->parent == parent && record->ns == ns &&
                     std::equal(record->tokens.begin(), record->tokens.end(), block_tokens.begin(),
                                block_tokens.end());
  if (valid) return ChainStep::READ;
  if (!record.ok() && record.error().message == "missing") {
    forget_missing(key);
    return ChainStep::MISSING;
  }
  log("cache dir " + config_.dir + ": dropped block " + block_key_hex(key).substr(0, 16) + ": " +
      (record.ok() ? std::string("its contents do not match its key") : record.error().message));
  std::vector<BlockKey> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    drop_locked(key, dropped);
    ++stats_.n_corrupt_dropped;
  }
  std::error_code ec;
  for (const BlockKey& k : dropped) fs::remove(block_path(k), ec);
  return ChainStep::DROPPED;
}

// An indexed block whose file is gone (deleted from outside; the tier's own evictions leave the
// index first): it and its descendants leave the index, so that the counts are true and the
// prefix can be written again. The check under the lock skips a block evicted meanwhile, or
// written again since the failed open.
void DiskTier::forget_missing(const BlockKey& key) {
  std::vector<BlockKey> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::error_code ec;
    if (!index_.contains(key) || fs::exists(block_path(key), ec)) return;
    drop_locked(key, dropped);
    stats_.n_missing_dropped += static_cast<int64_t>(dropped.size());
    if (!missing_logged_) {
      missing_logged_ = true;
      log("cache dir " + config_.dir + ": block files were deleted from outside; the blocks " +
          "whose files are gone leave the index as they are looked up (this is said once)");
    }
  }
  std::error_code ec;
  for (const BlockKey& k : dropped) fs::remove(block_path(k), ec);  // the descendants' files
}

int32_t DiskTier::walk_chain(const NamespaceDigest& ns, std::span<const TokenId> tokens,
                             int32_t first_block, int32_t max_tokens,
                             const ChainVisit& visit) const {
  const int32_t B = geometry_.block_size;
  const int32_t n_tokens = std::min<int32_t>(max_tokens, static_cast<int32_t>(tokens.size()));
  int32_t n_read = 0;
  BlockKey parent = kRootBlockKey;
  ChainStep step = ChainStep::READ;
  int32_t j = 0;
  for (; (j + 1) * B <= n_tokens; ++j) {
    const auto block_tokens =
        tokens.subspan(static_cast<size_t>(j) * static_cast<size_t>(B), static_cast<size_t>(B));
    const BlockKey key = chain_block_key(parent, ns, block_tokens);
    if (j >= first_block) {  // the blocks before are held elsewhere: only their keys are needed
      step = visit(key, parent, block_tokens);
      if (step != ChainStep::READ) break;
      ++n_read;
    }
    parent = key;
  }
  // Where the whole blocks end, a partial block may go on (never after a corrupt one).
  if (step != ChainStep::DROPPED && j >= first_block && j * B < n_tokens) {
    const std::span<const TokenId> rest =
        tokens.subspan(static_cast<size_t>(j) * B, static_cast<size_t>(n_tokens - j * B));
    const int32_t k = longest_partial(parent, ns, rest);
    if (k > 0) {
      const std::span<const TokenId> partial = rest.first(static_cast<size_t>(k));
      if (visit(chain_block_key(parent, ns, partial), parent, partial) == ChainStep::READ) ++n_read;
    }
  }
  return n_read;
}

int32_t DiskTier::chain_length(const NamespaceDigest& ns, std::span<const TokenId> tokens,
                               int32_t first_block, int32_t max_tokens) const {
  return walk_chain(ns, tokens, first_block, max_tokens,
                    [&](const BlockKey& key, const BlockKey&, std::span<const TokenId>) {
                      return contains(key) ? ChainStep::READ : ChainStep::MISSING;
                    });
}

std::vector<DiskTier::ChainBlock> DiskTier::read_chain_blocks(const NamespaceDigest& ns,
                                                              std::span<const TokenId> tokens,
                                                              int32_t first_block,
                                                              int32_t max_tokens,
                                                              std::span<uint8_t* const> kv) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<ChainBlock> chain;
  walk_chain(ns, tokens, first_block, max_tokens,
             [&](const BlockKey& key, const BlockKey& parent, std::span<const TokenId> block) {
               if (chain.size() == kv.size()) return ChainStep::MISSING;  // no room for more
               const ChainStep step = read_block(key, parent, ns, block, kv[chain.size()]);
               if (step == ChainStep::READ) chain.push_back({key, parent, block});
               return step;
             });
  // Deepest first: the parents end up more recent than their children (see the LRU above).
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) touch(it->key);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.read_ms += ms;
  return chain;
}

std::vector<int32_t> DiskTier::read_chain_into(const NamespaceDigest& ns,
                                               std::span<const TokenId> tokens, int32_t first_block,
                                               int32_t max_tokens, std::span<uint8_t* const> kv) {
  std::vector<int32_t> n_tokens;
  for (const ChainBlock& b : read_chain_blocks(ns, tokens, first_block, max_tokens, kv))
    n_tokens.push_back(static_cast<int32_t>(b.tokens.size()));
  return n_tokens;
}

std::vector<BlockRecord> DiskTier::read_chain(const NamespaceDigest& ns,
                                              std::span<const TokenId> tokens, int32_t first_block,
                                              int32_t max_tokens) {
  std::vector<BlockRecord> records(
      static_cast<size_t>(chain_length(ns, tokens, first_block, max_tokens)));
  std::vector<uint8_t*> kv;
  for (BlockRecord& r : records) {
    r.kv.resize(geometry_.kv_bytes);
    kv.push_back(r.kv.data());
  }
  const std::vector<ChainBlock> chain = read_chain_blocks(ns, tokens, first_block, max_tokens, kv);
  records.resize(chain.size());
  for (size_t i = 0; i < chain.size(); ++i) {
    records[i].key = chain[i].key;
    records[i].parent = chain[i].parent;
    records[i].ns = ns;
    records[i].tokens.assign(chain[i].tokens.begin(), chain[i].tokens.end());
  }
  return records;
}

DiskTierStats DiskTier::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  DiskTierStats s = stats_;
  s.n_blocks = static_cast<int64_t>(index_.size());
  s.n_bytes = s.n_blocks * static_cast<int64_t>(geometry_.file_bytes());
  s.budget_bytes = config_.budget_bytes;
  s.n_pending = static_cast<int64_t>(queue_.size()) + (writing_ ? 1 : 0);
  return s;
}

std::vector<BlockKey> DiskTier::lru_order() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::vector<BlockKey>(lru_.begin(), lru_.end());
}

}  // namespace trellis
