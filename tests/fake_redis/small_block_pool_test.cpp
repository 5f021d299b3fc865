#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fake_redis/small_block_pool.h"

namespace turnstile::testing {
namespace {

using sim::SmallBlockPool;

void fill(void* block, std::size_t size, std::uint8_t seed) {
  auto* bytes = static_cast<std::uint8_t*>(block);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::uint8_t>(seed + i);
}

bool holds(const void* block, std::size_t size, std::uint8_t seed) {
  const auto* bytes = static_cast<const std::uint8_t*>(block);
  for (std::size_t i = 0; i < size; ++i) {
    if (bytes[i] != static_cast<std::uint8_t>(seed + i)) return false;
  }
  return true;
}

// Growing and shrinking across size classes and across the small/large
// boundary keeps the contents up to the smaller size, as lua_Alloc must.
TEST(SmallBlockPoolTest, ReallocationKeepsContents) {
  SmallBlockPool pool;
  const std::vector<std::size_t> sizes = {
      1, 15, 16, 17, 100, SmallBlockPool::kMaxBytes, SmallBlockPool::kMaxBytes + 1, 4096, 300, 8, 2000, 1};
  void* block = nullptr;
  std::size_t size = 0;
  for (const std::size_t next : sizes) {
    block = pool.reallocate(block, size, next);
    ASSERT_NE(block, nullptr);
    ASSERT_TRUE(holds(block, std::min(size, next), 7)) << size << " -> " << next;
    fill(block, next, 7);
    size = next;
  }
  EXPECT_EQ(pool.reallocate(block, size, 0), nullptr);
}

// Freed blocks are reused, and live blocks never overlap.
TEST(SmallBlockPoolTest, LiveBlocksAreDistinctAndFreedOnesReused) {
  SmallBlockPool pool;
  std::vector<void*> blocks;
  for (int i = 0; i < 10'000; ++i) {
    void* block = pool.reallocate(nullptr, 0, 24);
    ASSERT_NE(block, nullptr);
    fill(block, 24, static_cast<std::uint8_t>(i));
    blocks.push_back(block);
  }
  for (int i = 0; i < 10'000; ++i)
    ASSERT_TRUE(holds(blocks[static_cast<std::size_t>(i)], 24, static_cast<std::uint8_t>(i)));
  void* last = blocks.back();
  EXPECT_EQ(pool.reallocate(last, 24, 0), nullptr);
  EXPECT_EQ(pool.reallocate(nullptr, 0, 20), last);  // same size class
  blocks.back() = last;
  for (void* block : blocks) pool.reallocate(block, 24, 0);
}

}  // namespace
}  // namespace turnstile::testing
