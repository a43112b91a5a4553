// The disk tier on its own: record round trips, the index rebuilt at open, truncated and corrupt
// records dropped (never returned), tiers of another identity ignored, the directory lock, the
// LRU byte budget's exact eviction order, namespaces, and a crash loop that SIGKILLs a writing
// process at random moments and checks that the tier always opens and only returns exact blocks.
#include "kvdisk/disk_tier.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/checksum256.h"
#include "base/sha256.h"
#include "test_support.h"

namespace trellis {
namespace {
namespace fs = std::filesystem;

constexpr int32_t kBlock = 4;
constexpr uint64_t kKvBytes = 256;

TierIdentity identity(int32_t block_size = kBlock) {
  TierIdentity id;
  id.model_sha256 = std::string(64, 'a');
  id.architecture = "llama";
  id.kv_type = "f16";
  id.block_size = block_size;
  id.block_bytes = kKvBytes;
  return id;
}

std::string fresh_dir(const std::string& name) {
  const std::string dir = testing::temp_dir() + "/" + name;
  fs::remove_all(dir);
  return dir;
}

struct Captured {
  std::vector<std::string> lines;
};

DiskTierConfig config(const std::string& dir, int64_t budget_blocks, Captured* log = nullptr,
                      int32_t block_size = kBlock) {
  DiskTierConfig c;
  c.dir = dir;
  c.identity = identity(block_size);
  c.budget_bytes =
      budget_blocks * static_cast<int64_t>(RecordGeometry{{}, block_size, kKvBytes}.file_bytes());
  c.log = [log](const std::string& line) {
    if (log != nullptr) log->lines.push_back(line);
  };
  return c;
}

std::unique_ptr<DiskTier> open_tier(const DiskTierConfig& c) {
  Result<std::unique_ptr<DiskTier>> tier = DiskTier::open(c);
  EXPECT_TRUE(tier.ok()) << tier.error().message;
  return tier.ok() ? std::move(tier).value() : nullptr;
}

// The KV bytes of a block are a function of its key, so a test can tell a right block from a
// wrong one without keeping what it wrote.
std::vector<uint8_t> kv_of(const BlockKey& key) {
  std::vector<uint8_t> kv(kKvBytes);
  for (size_t i = 0; i < kv.size(); ++i) kv[i] = static_cast<uint8_t>(key[i % 32] + i * 7);
  return kv;
}

// Queues the whole blocks of `tokens` (namespace ns) for writing, block 0 first.
void write_chain(DiskTier& tier, std::string_view ns, const std::vector<TokenId>& tokens) {
  const NamespaceDigest digest = namespace_digest(ns);
  const auto n = static_cast<int32_t>(tokens.size()) / tier.block_size();
  const std::vector<BlockKey> keys = chain_block_keys(digest, tokens, tier.block_size(), n);
  for (int32_t j = 0; j < n; ++j) {
    BlockRecord r;
    r.key = keys[static_cast<size_t>(j)];
    r.parent = j == 0 ? kRootBlockKey : keys[static_cast<size_t>(j - 1)];
    r.ns = digest;
    r.tokens.assign(tokens.begin() + j * tier.block_size(),
                    tokens.begin() + (j + 1) * tier.block_size());
    r.kv = kv_of(r.key);
    tier.write_async(std::move(r));
  }
}

std::vector<TokenId> seq(TokenId first, int n) {
  std::vector<TokenId> t;
  for (int i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

int32_t chain_length(DiskTier& tier, std::string_view ns, const std::vector<TokenId>& tokens) {
  std::vector<BlockRecord> chain = tier.read_chain(namespace_digest(ns), tokens, 1 << 20);
  for (const BlockRecord& r : chain) EXPECT_EQ(r.kv, kv_of(r.key));
  return static_cast<int32_t>(chain.size());
}

std::vector<std::string> block_files(const DiskTier& tier) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(tier.tier_dir() + "/blocks"))
    names.push_back(e.path().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(BlockRecordTest, RoundTripsAndRejectsEveryFlippedByteOfASample) {
  RecordGeometry g{identity().digest(), kBlock, kKvBytes};
  BlockRecord r;
  r.key = chain_block_key(kRootBlockKey, namespace_digest(""), seq(1, kBlock));
  r.ns = namespace_digest("");
  r.tokens = seq(1, kBlock);
  r.kv = kv_of(r.key);
  std::vector<uint8_t> bytes = encode_block_record(r, g);
  ASSERT_EQ(bytes.size(), g.file_bytes());
  Result<BlockRecord> back = decode_block_record(bytes, g);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->key, r.key);
  EXPECT_EQ(back->tokens, r.tokens);
  EXPECT_EQ(back->kv, r.kv);
  // Read in parts (the K/V straight into its destination): the same checks.
  const std::span<const uint8_t> all(bytes);
  const auto parts = [&](std::span<const uint8_t> whole) {
    return decode_record_parts(whole.first(g.kv_offset()), whole.subspan(g.kv_offset(), kKvBytes),
                               whole.last(RecordGeometry::kChecksumBytes), g);
  };
  Result<BlockRecord> in_parts = parts(all);
  ASSERT_TRUE(in_parts.ok()) << in_parts.error().message;
  EXPECT_EQ(in_parts->tokens, r.tokens);
  EXPECT_TRUE(in_parts->kv.empty());
  std::vector<uint8_t> torn = bytes;
  torn[torn.size() / 2] ^= 1;
  EXPECT_FALSE(decode_block_record(torn, g).ok());
  EXPECT_FALSE(parts(torn).ok());
  EXPECT_FALSE(decode_record_parts(all.first(g.kv_offset() - 1),
                                   all.subspan(g.kv_offset(), kKvBytes),
                                   all.last(RecordGeometry::kChecksumBytes), g)
                   .ok());
  for (size_t i = 0; i < bytes.size(); i += 13) {
    std::vector<uint8_t> bad = bytes;
    bad[i] ^= 0x40;
    EXPECT_FALSE(decode_block_record(bad, g).ok()) << "flipped byte " << i;
    EXPECT_FALSE(parts(bad).ok()) << "flipped byte " << i;
  }
  EXPECT_FALSE(decode_block_record(std::span(bytes).first(bytes.size() - 1), g).ok());
  RecordGeometry other = g;
  other.block_size = kBlock * 2;
  EXPECT_FALSE(decode_record_header(bytes, other).ok());
}

TEST(BlockKeyTest, KeysChainThroughEveryEarlierTokenAndTheNamespace) {
  const std::vector<TokenId> a = seq(1, 12);
  std::vector<TokenId> b = a;
  b[1] = 99;  // differs in block 0 only
  const auto ka = chain_block_keys(namespace_digest(""), a, 4, 3);
  const auto kb = chain_block_keys(namespace_digest(""), b, 4, 3);
  const auto kc = chain_block_keys(namespace_digest("other"), a, 4, 3);
  for (size_t j = 0; j < 3; ++j) {
    EXPECT_NE(ka[j], kb[j]) << j;  // block 2's tokens are equal, its prefix is not
    EXPECT_NE(ka[j], kc[j]) << j;
  }
  EXPECT_EQ(ka, chain_block_keys(namespace_digest(""), a, 4, 3));
}

TEST(TierIdentityTest, TheModelHashIsRememberedBySizeAndModificationTime) {
  const std::string dir = fresh_dir("memo");
  fs::create_directories(dir);
  const std::string model = dir + "/model.bin", memo = dir + "/model-digests";
  std::ofstream(model) << "weights";
  Result<std::string> direct = sha256_file(model);
  ASSERT_TRUE(direct.ok());
  Result<std::string> first = remembered_file_sha256(model, memo);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(*first, *direct);
  // The memo is what answers while the file's size and time are unchanged: a forged digest in it
  // comes back (the file is not hashed again).
  std::string text;
  {
    std::ifstream in(memo);
    std::getline(in, text);
  }
  ASSERT_EQ(text.substr(0, 64), *direct);
  std::ofstream(memo, std::ios::trunc) << std::string(64, 'e') << text.substr(64) << "\n";
  EXPECT_EQ(*remembered_file_sha256(model, memo), std::string(64, 'e'));
  // A changed file (another size) is hashed again, and the memo keeps one line for it.
  std::ofstream(model, std::ios::app) << " and more";
  Result<std::string> changed = remembered_file_sha256(model, memo);
  ASSERT_TRUE(changed.ok());
  EXPECT_EQ(*changed, *sha256_file(model));
  std::ifstream in(memo);
  int n_lines = 0;
  for (std::string line; std::getline(in, line);) ++n_lines;
  EXPECT_EQ(n_lines, 1);
  EXPECT_FALSE(remembered_file_sha256(dir + "/missing.bin", memo).ok());
}

TEST(DiskTierTest, WrittenChainsAreReadBackAfterARestart) {
  const std::string dir = fresh_dir("restart");
  const std::vector<TokenId> tokens = seq(10, 4 * kBlock + 2);
  {
    auto tier = open_tier(config(dir, 100));
    write_chain(*tier, "", tokens);
    tier->wait_idle();
    EXPECT_EQ(tier->stats().n_blocks, 4);
    EXPECT_EQ(tier->stats().n_blocks_written, 4);
    EXPECT_EQ(chain_length(*tier, "", tokens), 4);
  }
  auto tier = open_tier(config(dir, 100));
  EXPECT_EQ(tier->stats().n_blocks, 4);
  EXPECT_EQ(chain_length(*tier, "", tokens), 4);
  // A prompt that shares two blocks finds two; max_tokens caps the read.
  std::vector<TokenId> other = tokens;
  other[2 * kBlock] = 7777;
  EXPECT_EQ(chain_length(*tier, "", other), 2);
  EXPECT_EQ(tier->read_chain(namespace_digest(""), tokens, 3 * kBlock).size(), 3u);
  EXPECT_EQ(tier->read_chain(namespace_digest(""), tokens, 3 * kBlock + 1).size(), 3u);
  EXPECT_EQ(tier->stats().n_corrupt_dropped, 0);
}

// Queues the partial block tokens[j * B, size) after the whole blocks before it.
void write_partial(DiskTier& tier, const std::vector<TokenId>& tokens) {
  const int32_t B = tier.block_size();
  const auto j = static_cast<int32_t>(tokens.size()) / B;
  const NamespaceDigest digest = namespace_digest("");
  const std::vector<BlockKey> keys = chain_block_keys(digest, tokens, B, j);
  BlockRecord r;
  r.parent = j == 0 ? kRootBlockKey : keys.back();
  r.tokens.assign(tokens.begin() + j * B, tokens.end());
  r.key = chain_block_key(r.parent, digest, r.tokens);
  r.ns = digest;
  r.kv = kv_of(r.key);
  tier.write_async(std::move(r));
}

TEST(DiskTierTest, APartialLastBlockGoesOnFromTheWholeOnes) {
  const std::string dir = fresh_dir("partial");
  const std::vector<TokenId> tokens = seq(10, 2 * kBlock + 3);  // 2 whole blocks, 3 more tokens
  {
    auto tier = open_tier(config(dir, 100));
    write_chain(*tier, "", tokens);
    write_partial(*tier, tokens);
    tier->wait_idle();
    EXPECT_EQ(tier->stats().n_blocks, 3);
  }
  auto tier = open_tier(config(dir, 100));  // and after a restart
  const NamespaceDigest ns = namespace_digest("");
  const BlockKey parent = chain_block_keys(ns, tokens, kBlock, 2).back();
  // A prompt that goes on past the partial block finds all of it; one that stops inside it, or
  // diverges inside it, finds none (a partial block is used whole or not at all).
  std::vector<TokenId> longer = tokens;
  longer.insert(longer.end(), {1, 2, 3});
  std::vector<BlockRecord> chain = tier->read_chain(ns, longer, 1 << 20);
  ASSERT_EQ(chain.size(), 3u);
  EXPECT_EQ(chain[2].tokens, std::vector<TokenId>(tokens.end() - 3, tokens.end()));
  EXPECT_EQ(chain[2].kv, kv_of(chain[2].key));
  EXPECT_EQ(tier->longest_partial(parent, ns, std::span(longer).subspan(2 * kBlock)), 3);
  EXPECT_EQ(tier->read_chain(ns, tokens, 2 * kBlock + 2).size(), 2u);  // capped inside it
  std::vector<TokenId> diverging = tokens;
  diverging.back() = 9999;
  EXPECT_EQ(tier->read_chain(ns, diverging, 1 << 20).size(), 2u);
  EXPECT_EQ(tier->longest_partial(parent, ns, std::span(diverging).subspan(2 * kBlock)), 0);
  // From block 2 on, with the whole blocks held elsewhere: only the partial one is read.
  chain = tier->read_chain(ns, longer, 2, 1 << 20);
  ASSERT_EQ(chain.size(), 1u);
  EXPECT_EQ(chain[0].tokens.size(), 3u);
  // Planned from the index alone, then read into destinations of the caller's: as many blocks
  // as it gives room for, each with its token count.
  EXPECT_EQ(tier->chain_length(ns, longer, 0, 1 << 20), 3);
  EXPECT_EQ(tier->chain_length(ns, longer, 1, 1 << 20), 2);
  EXPECT_EQ(tier->chain_length(ns, diverging, 0, 1 << 20), 2);
  std::vector<uint8_t> first(kKvBytes), second(kKvBytes);
  uint8_t* const into[] = {first.data(), second.data()};
  EXPECT_EQ(tier->read_chain_into(ns, longer, 1, 1 << 20, into), (std::vector<int32_t>{kBlock, 3}));
  EXPECT_EQ(second, kv_of(chain_block_key(parent, ns, std::span(tokens).subspan(2 * kBlock))));
  EXPECT_EQ(tier->read_chain_into(ns, longer, 0, 1 << 20, std::span(into).first(1)),
            (std::vector<int32_t>{kBlock}));
  EXPECT_EQ(first, kv_of(chain_block_keys(ns, tokens, kBlock, 1)[0]));
  // Dropping its parent (over the budget, oldest first) takes the partial block with it.
  tier.reset();
  tier = open_tier(config(dir, 2));
  EXPECT_LE(tier->stats().n_blocks, 2);
  EXPECT_LE(tier->read_chain(ns, longer, 1 << 20).size(), 2u);
}

TEST(DiskTierTest, BlocksStillQueuedForTheWriterAreReadFromTheQueue) {
  const std::string dir = fresh_dir("queued");
  auto tier = open_tier(config(dir, 100));
  for (TokenId first = 0; first < 20 * 100; first += 100) {
    const std::vector<TokenId> tokens = seq(first, 3 * kBlock);
    write_chain(*tier, "", tokens);
    // No wait: whether the writer got to them or not, all three are there, and exact.
    EXPECT_EQ(chain_length(*tier, "", tokens), 3) << first;
  }
  tier->wait_idle();
  const DiskTierStats s = tier->stats();
  EXPECT_EQ(s.n_blocks, 60);
  EXPECT_EQ(s.n_blocks_read + s.n_blocks_read_pending, 60);
}

TEST(BlockRecordTest, APartialRecordRoundTripsAndATokenCountOutOfRangeIsRejected) {
  RecordGeometry g{identity().digest(), kBlock, kKvBytes};
  BlockRecord r;
  r.tokens = seq(1, 3);
  r.ns = namespace_digest("");
  r.key = chain_block_key(kRootBlockKey, r.ns, r.tokens);
  r.kv = kv_of(r.key);
  std::vector<uint8_t> bytes = encode_block_record(r, g);
  Result<BlockRecord> back = decode_block_record(bytes, g);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->tokens, r.tokens);
  for (uint32_t n : {0u, static_cast<uint32_t>(kBlock) + 1, 0xFFFFFFFFu}) {
    std::vector<uint8_t> bad = bytes;
    for (int i = 0; i < 4; ++i)
      bad[152 + static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
    Result<BlockRecord> decoded = decode_block_record(bad, g);
    ASSERT_FALSE(decoded.ok()) << n;
    EXPECT_NE(decoded.error().message.find("tokens"), std::string::npos) << decoded.error().message;
  }
  // A token in a slot past the count, under a checksum that matches (as a fuzzer forges it): not a
  // record this format writes, so refused rather than read as one it would write differently.
  std::vector<uint8_t> padded = bytes;
  padded[g.tokens_offset() + 4 * 3] = 7;
  Checksum256Builder checksum;
  checksum.update(std::span<const uint8_t>(padded).first(padded.size() - 32));
  const Checksum256 sum = checksum.finish();
  std::copy(sum.begin(), sum.end(), padded.end() - 32);
  Result<BlockRecord> forged = decode_block_record(padded, g);
  ASSERT_FALSE(forged.ok());
  EXPECT_NE(forged.error().message.find("token slot 3 past the record's 3 tokens is not zero"),
            std::string::npos)
      << forged.error().message;
}

TEST(DiskTierTest, NamespacesNeverReadEachOthersBlocksAcrossRestarts) {
  const std::string dir = fresh_dir("namespaces");
  const std::vector<TokenId> tokens = seq(5, 3 * kBlock);
  {
    auto tier = open_tier(config(dir, 100));
    write_chain(*tier, "alice-digest", tokens);
  }
  auto tier = open_tier(config(dir, 100));
  EXPECT_EQ(chain_length(*tier, "bob-digest", tokens), 0);
  EXPECT_EQ(chain_length(*tier, "", tokens), 0);
  EXPECT_EQ(chain_length(*tier, "alice-digest", tokens), 3);
  // The namespace is stored as a digest only.
  for (const std::string& path : block_files(*tier)) {
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(bytes.find("alice"), std::string::npos);
  }
}

TEST(DiskTierTest, TruncatedRecordsAreDroppedAtOpenWithTheirDescendants) {
  const std::string dir = fresh_dir("truncated");
  const std::vector<TokenId> a = seq(1, 3 * kBlock);
  const std::vector<TokenId> b = seq(100, 2 * kBlock);
  std::string victim;
  {
    auto tier = open_tier(config(dir, 100));
    write_chain(*tier, "", a);
    write_chain(*tier, "", b);
    tier->wait_idle();
    // Block 1 of chain a.
    const auto keys = chain_block_keys(namespace_digest(""), a, kBlock, 3);
    victim = tier->tier_dir() + "/blocks/" + block_key_hex(keys[1]) + ".blk";
  }
  fs::resize_file(victim, fs::file_size(victim) - 10);
  Captured log;
  auto tier = open_tier(config(dir, 100, &log));
  EXPECT_FALSE(fs::exists(victim));
  EXPECT_EQ(tier->stats().n_blocks, 3);  // a's block 0, b's two; a's block 2 was orphaned
  EXPECT_EQ(chain_length(*tier, "", a), 1);
  EXPECT_EQ(chain_length(*tier, "", b), 2);
  EXPECT_EQ(tier->stats().n_corrupt_dropped, 1);
  ASSERT_EQ(log.lines.size(), 1u);
  EXPECT_NE(log.lines[0].find("dropped 1 truncated"), std::string::npos) << log.lines[0];
}

TEST(DiskTierTest, ACorruptRecordIsDetectedWhenReadAndNeverReturned) {
  const std::string dir = fresh_dir("corrupt");
  const std::vector<TokenId> a = seq(1, 3 * kBlock);
  {
    auto tier = open_tier(config(dir, 100));
    write_chain(*tier, "", a);
    tier->wait_idle();
    const auto keys = chain_block_keys(namespace_digest(""), a, kBlock, 3);
    const std::string path = tier->tier_dir() + "/blocks/" + block_key_hex(keys[2]) + ".blk";
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(RecordGeometry{{}, kBlock, kKvBytes}.kv_offset() + 3));
    f.put('\x5a');
  }
  Captured log;
  auto tier = open_tier(config(dir, 100, &log));
  EXPECT_EQ(tier->stats().n_blocks, 3);  // the header is intact: only the checksum tells
  EXPECT_EQ(chain_length(*tier, "", a), 2);
  EXPECT_EQ(tier->stats().n_blocks, 2);
  EXPECT_EQ(tier->stats().n_corrupt_dropped, 1);
  ASSERT_EQ(log.lines.size(), 1u);
  EXPECT_NE(log.lines[0].find("checksum"), std::string::npos) << log.lines[0];
  EXPECT_EQ(chain_length(*tier, "", a), 2);  // stays dropped, nothing more logged
  EXPECT_EQ(log.lines.size(), 1u);
}

TEST(DiskTierTest, JunkAndLeftoverTemporaryFilesNeverBreakOpen) {
  const std::string dir = fresh_dir("junk");
  std::string tier_dir;
  {
    auto tier = open_tier(config(dir, 100));
    write_chain(*tier, "", seq(1, 2 * kBlock));
    tier->wait_idle();
    tier_dir = tier->tier_dir();
  }
  std::ofstream(tier_dir + "/tmp/" + std::string(64, 'b') + ".blk") << "half a record";
  std::ofstream(tier_dir + "/blocks/" + std::string(64, 'c') + ".blk") << "garbage";
  std::ofstream(tier_dir + "/blocks/notes.txt") << "not a block";
  auto tier = open_tier(config(dir, 100));
  EXPECT_EQ(tier->stats().n_blocks, 2);
  EXPECT_TRUE(fs::is_empty(tier_dir + "/tmp"));
  EXPECT_EQ(block_files(*tier).size(), 2u);
  EXPECT_EQ(chain_length(*tier, "", seq(1, 2 * kBlock)), 2);
}

TEST(DiskTierTest, ATierOfAnotherIdentityIsIgnoredWithOneLogLine) {
  const std::string dir = fresh_dir("identity");
  const std::vector<TokenId> tokens = seq(1, 4 * kBlock);
  {
    auto tier = open_tier(config(dir, 100));
    write_chain(*tier, "", tokens);
  }
  Captured log;
  {
    auto tier = open_tier(config(dir, 100, &log, 2 * kBlock));  // another block size
    EXPECT_EQ(tier->stats().n_blocks, 0);
    EXPECT_EQ(chain_length(*tier, "", tokens), 0);
  }
  ASSERT_EQ(log.lines.size(), 1u);
  EXPECT_NE(log.lines[0].find("ignoring 1 tier"), std::string::npos) << log.lines[0];
  DiskTierConfig other_model = config(dir, 100);
  other_model.identity.model_sha256 = std::string(64, 'f');
  EXPECT_EQ(open_tier(other_model)->stats().n_blocks, 0);
  // The first tier is still whole.
  auto tier = open_tier(config(dir, 100));
  EXPECT_EQ(chain_length(*tier, "", tokens), 4);
}

TEST(DiskTierTest, ASecondOpenOfTheSameDirectoryIsRefused) {
  const std::string dir = fresh_dir("lock");
  auto first = open_tier(config(dir, 10));
  Result<std::unique_ptr<DiskTier>> second = DiskTier::open(config(dir, 10));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.error().message.find("in use by another process"), std::string::npos)
      << second.error().message;
  EXPECT_NE(second.error().message.find(std::to_string(::getpid())), std::string::npos);
  first.reset();
  EXPECT_TRUE(DiskTier::open(config(dir, 10)).ok());
}

TEST(DiskTierTest, AnotherProcessHoldingTheDirectoryIsRefused) {
  const std::string dir = fresh_dir("lock-process");
  int to_parent[2];
  ASSERT_EQ(::pipe(to_parent), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Result<DirLock> lock = DirLock::acquire(dir);
    const char c = lock.ok() ? 'y' : 'n';
    [[maybe_unused]] ssize_t w = ::write(to_parent[1], &c, 1);
    ::pause();  // until killed
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(to_parent[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  Result<std::unique_ptr<DiskTier>> refused = DiskTier::open(config(dir, 10));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("pid " + std::to_string(child)), std::string::npos)
      << refused.error().message;
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(DiskTier::open(config(dir, 10)).ok());  // the kernel released the dead one's lock
  ::close(to_parent[0]);
  ::close(to_parent[1]);
}

TEST(DiskTierTest, TheBudgetEvictsLeastRecentlyUsedBlocksInExactOrder) {
  const std::string dir = fresh_dir("budget");
  auto tier = open_tier(config(dir, 3));
  const std::vector<TokenId> a = seq(1, kBlock), b = seq(100, kBlock), c = seq(200, kBlock),
                             d = seq(300, kBlock);
  auto key = [](const std::vector<TokenId>& t) {
    return chain_block_keys(namespace_digest(""), t, kBlock, 1)[0];
  };
  write_chain(*tier, "", a);
  write_chain(*tier, "", b);
  write_chain(*tier, "", c);
  tier->wait_idle();
  EXPECT_EQ(tier->lru_order(), (std::vector<BlockKey>{key(a), key(b), key(c)}));
  EXPECT_EQ(chain_length(*tier, "", a), 1);  // a becomes the most recent
  EXPECT_EQ(tier->lru_order(), (std::vector<BlockKey>{key(b), key(c), key(a)}));
  write_chain(*tier, "", d);
  tier->wait_idle();
  EXPECT_EQ(tier->lru_order(), (std::vector<BlockKey>{key(c), key(a), key(d)}));
  EXPECT_EQ(chain_length(*tier, "", b), 0);
  EXPECT_EQ(tier->stats().n_blocks_evicted, 1);
  EXPECT_EQ(tier->stats().n_bytes, tier->stats().budget_bytes);
  EXPECT_EQ(block_files(*tier).size(), 3u);
  // A chain read touches its deepest block first: parents outlive their children.
  const std::vector<TokenId> e = seq(400, 2 * kBlock);
  write_chain(*tier, "", e);
  tier->wait_idle();
  EXPECT_EQ(chain_length(*tier, "", e), 2);
  const auto ke = chain_block_keys(namespace_digest(""), e, kBlock, 2);
  EXPECT_EQ(tier->lru_order(), (std::vector<BlockKey>{key(d), ke[1], ke[0]}));
}

TEST(DiskTierTest, EvictingABlockTakesItsDescendantsWithIt) {
  const std::string dir = fresh_dir("descendants");
  auto tier = open_tier(config(dir, 3));
  const std::vector<TokenId> f = seq(1, 2 * kBlock), g = seq(100, kBlock), h = seq(200, kBlock);
  auto key = [](const std::vector<TokenId>& t) {
    return chain_block_keys(namespace_digest(""), t, kBlock, 1)[0];
  };
  write_chain(*tier, "", f);  // f's block 0, then its block 1: the parent is the oldest
  write_chain(*tier, "", g);
  tier->wait_idle();
  write_chain(*tier, "", h);  // over the budget: f's block 0 goes, and block 1 (unreachable)
  tier->wait_idle();
  EXPECT_EQ(tier->lru_order(), (std::vector<BlockKey>{key(g), key(h)}));
  EXPECT_EQ(tier->stats().n_blocks_evicted, 2);
  EXPECT_EQ(block_files(*tier).size(), 2u);
  EXPECT_EQ(chain_length(*tier, "", f), 0);
}

TEST(DiskTierTest, ABudgetShrunkSinceTheLastRunEvictsTheOldestAtOpen) {
  const std::string dir = fresh_dir("shrunk");
  {
    auto tier = open_tier(config(dir, 10));
    for (TokenId t = 0; t < 5; ++t) write_chain(*tier, "", seq(1000 * (t + 1), kBlock));
    tier->wait_idle();
    // The order over restarts is the files' modification times; file systems may keep them
    // coarser than the writes' pace, so the test sets them: block t is t seconds old.
    const auto now = fs::file_time_type::clock::now();
    for (TokenId t = 0; t < 5; ++t) {
      const BlockKey key =
          chain_block_keys(namespace_digest(""), seq(1000 * (t + 1), kBlock), kBlock, 1)[0];
      fs::last_write_time(tier->tier_dir() + "/blocks/" + block_key_hex(key) + ".blk",
                          now - std::chrono::seconds(10 - t));
    }
  }
  auto tier = open_tier(config(dir, 2));
  EXPECT_EQ(tier->stats().n_blocks, 2);
  EXPECT_EQ(chain_length(*tier, "", seq(4000, kBlock)), 1);
  EXPECT_EQ(chain_length(*tier, "", seq(5000, kBlock)), 1);
  EXPECT_EQ(chain_length(*tier, "", seq(1000, kBlock)), 0);
}

TEST(DiskTierTest, AFullWriteQueueDropsInsteadOfWaiting) {
  const std::string dir = fresh_dir("queue");
  DiskTierConfig c = config(dir, 1000);
  c.max_pending_bytes = 0;  // nothing may wait
  auto tier = open_tier(c);
  write_chain(*tier, "", seq(1, 2 * kBlock));
  tier->wait_idle();
  EXPECT_EQ(tier->stats().n_writes_dropped, 2);
  EXPECT_EQ(tier->stats().n_blocks, 0);
}

// Block files deleted from outside while the tier runs leave the index when looked up, so the
// counts are true and the prefix is written again; before, they stayed counted and the prefix
// was never written again (write_async saw it indexed).
TEST(DiskTierTest, BlockFilesDeletedFromOutsideLeaveTheIndexAndAreWrittenAgain) {
  const std::string dir = fresh_dir("deleted");
  Captured log;
  auto tier = open_tier(config(dir, 100, &log));
  const std::vector<TokenId> a = seq(1, 3 * kBlock);
  write_chain(*tier, "", a);
  tier->wait_idle();
  ASSERT_EQ(tier->stats().n_blocks, 3);
  for (const std::string& file : block_files(*tier)) fs::remove(file);
  EXPECT_EQ(chain_length(*tier, "", a), 0);
  EXPECT_EQ(tier->stats().n_blocks, 0) << "the index still counts the deleted blocks";
  EXPECT_EQ(tier->stats().n_missing_dropped, 3);
  EXPECT_EQ(tier->stats().n_corrupt_dropped, 0);
  ASSERT_EQ(log.lines.size(), 1u);
  EXPECT_NE(log.lines[0].find("deleted from outside"), std::string::npos) << log.lines[0];
  write_chain(*tier, "", a);
  tier->wait_idle();
  EXPECT_EQ(tier->stats().n_blocks, 3);
  EXPECT_EQ(block_files(*tier).size(), 3u);
  EXPECT_EQ(chain_length(*tier, "", a), 3);
}

// Polls `condition` for at most `limit`.
template <typename Condition>
bool within(std::chrono::milliseconds limit, Condition condition) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!condition() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return condition();
}

// A disk that refuses writes (here: a file size limit, as a full disk would; root is not exempt)
// is logged once, the blocks wait in memory and are written once the disk takes them again;
// before, each was dropped without a word and the tier stayed below its budget.
TEST(DiskTierTest, ARefusedWriteIsLoggedOnceAndTriedAgainLater) {
  const std::string dir = fresh_dir("refused");
  Captured log;
  DiskTierConfig c = config(dir, 100, &log);
  c.write_retry = std::chrono::milliseconds(20);
  auto tier = open_tier(c);
  rlimit normal{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &normal), 0);
  const auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of a signal
  rlimit tiny = normal;
  tiny.rlim_cur = 16;  // smaller than any record
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &tiny), 0);
  const std::vector<TokenId> a = seq(1, 2 * kBlock);
  write_chain(*tier, "", a);
  const bool retried =
      within(std::chrono::seconds(5), [&] { return tier->stats().n_write_errors >= 3; });
  tier->wait_idle();  // returns on a refusing disk instead of waiting for it
  const DiskTierStats refused = tier->stats();
  ::setrlimit(RLIMIT_FSIZE, &normal);
  std::signal(SIGXFSZ, previous_handler);
  EXPECT_TRUE(retried) << "the failed write was not tried again";
  EXPECT_EQ(refused.n_blocks, 0);
  EXPECT_EQ(refused.n_pending, 2) << "the blocks must wait, not be dropped";
  EXPECT_TRUE(within(std::chrono::seconds(5), [&] { return tier->stats().n_blocks == 2; }));
  EXPECT_EQ(chain_length(*tier, "", a), 2);
  EXPECT_EQ(tier->stats().n_writes_dropped, 0);
  ASSERT_EQ(log.lines.size(), 2u);
  EXPECT_NE(log.lines[0].find("cannot write a block (File too large)"), std::string::npos)
      << log.lines[0];
  EXPECT_NE(log.lines[1].find("written again"), std::string::npos) << log.lines[1];
}

TEST(DiskTierTest, BadConfigurationsAreClearErrors) {
  const std::string dir = fresh_dir("bad");
  DiskTierConfig c = config(dir, 1);
  c.budget_bytes = 10;
  Result<std::unique_ptr<DiskTier>> tier = DiskTier::open(c);
  ASSERT_FALSE(tier.ok());
  EXPECT_NE(tier.error().message.find("smaller than one KV block"), std::string::npos);
  std::ofstream(testing::temp_dir() + "/a-file") << "x";
  c = config(testing::temp_dir() + "/a-file/sub", 10);
  EXPECT_FALSE(DiskTier::open(c).ok());
}

// A child process writes chains (every one a function of its seed) as fast as it can; the parent
// kills it with SIGKILL after a random delay (up to 200 ms: under ThreadSanitizer a child needs
// tens of milliseconds before its first durable block), then opens the tier: open must succeed,
// and every block it returns must be exact. Repeated with more and more blocks on disk.
TEST(DiskTierTest, KillingAWriterAtAnyMomentNeverYieldsAWrongBlockOrABrokenTier) {
  const std::string dir = fresh_dir("crash");
  std::mt19937 rng(1234);
  int64_t max_seen = 0;
  for (int round = 0; round < 25; ++round) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      Result<std::unique_ptr<DiskTier>> tier = DiskTier::open(config(dir, 40));
      if (!tier.ok()) ::_exit(3);
      for (uint32_t i = 0;; ++i) {
        std::mt19937 chain_rng(round * 100000 + i);
        write_chain(**tier, "", seq(static_cast<TokenId>(chain_rng() % 50) * 8, 3 * kBlock));
        if (i % 4 == 0) (*tier)->wait_idle();
      }
    }
    ::usleep(static_cast<useconds_t>(std::uniform_int_distribution<int>(0, 200000)(rng)));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the writer exited by itself: " << status;
    Result<std::unique_ptr<DiskTier>> tier = DiskTier::open(config(dir, 40));
    ASSERT_TRUE(tier.ok()) << tier.error().message;
    // Every chain the child could have written: each block returned must be exact.
    for (TokenId first = 0; first < 50 * 8; first += 8) {
      std::vector<BlockRecord> chain =
          (*tier)->read_chain(namespace_digest(""), seq(first, 3 * kBlock), 3 * kBlock);
      for (const BlockRecord& r : chain) ASSERT_EQ(r.kv, kv_of(r.key));
    }
    const DiskTierStats s = (*tier)->stats();
    EXPECT_EQ(s.n_corrupt_dropped, 0);  // a killed process never leaves a torn indexed record
    EXPECT_LE(s.n_blocks, 40);
    max_seen = std::max(max_seen, s.n_blocks);
    EXPECT_TRUE(fs::is_empty((*tier)->tier_dir() + "/tmp"));
  }
  EXPECT_GT(max_seen, 0);  // the loop did exercise writes
}

}  // namespace
}  // namespace trellis
