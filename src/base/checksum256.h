// A fast 256-bit checksum for detecting torn or corrupted data (a record half written when the
// process died, a flipped bit on disk). Not cryptographic: it guards against accidents, not
// against someone who can write the data anyway. It reads about 4 bytes per cycle, where SHA-256
// reads one every ~10 cycles, so verifying the megabytes of KV read back from disk costs little.
//
// Four independent 64-bit lanes take the input's 8-byte little-endian words in turn (word i goes
// to lane i % 4); a lane's step h <- rotl(h ^ w * M1, 29) * M2 is a bijection of h for a fixed w
// and of w for a fixed h, so any change confined to one word always changes the result, and other
// changes survive with probability about 2^-64 per lane. The length and a final avalanche make
// the output depend on every bit and on where the input ends.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace trellis {

using Checksum256 = std::array<uint8_t, 32>;

Checksum256 checksum256(std::span<const uint8_t> bytes);

// The same checksum over bytes that arrive in pieces (a record's header in one buffer, its K/V
// read straight into the KV pool): update() with each piece in order, then finish(). The result
// equals checksum256() of the pieces joined.
class Checksum256Builder {
 public:
  Checksum256Builder();
  void update(std::span<const uint8_t> bytes);
  Checksum256 finish() const;

 private:
  static constexpr size_t kStripe = 32;  // one 8-byte word per lane
  uint64_t lane_[4];
  uint8_t pending_[kStripe] = {};  // a stripe begun by one piece, to be completed by the next
  size_t n_pending_ = 0;
  uint64_t length_ = 0;
};

}  // namespace trellis
