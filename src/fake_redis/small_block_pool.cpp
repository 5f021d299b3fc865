#include "fake_redis/small_block_pool.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/check.h"

namespace turnstile::sim {

SmallBlockPool::~SmallBlockPool() {
  for (void* chunk : chunks_) std::free(chunk);
}

bool SmallBlockPool::refill(std::size_t size_class) {
  TURNSTILE_CHECK(size_class < kClasses && free_[size_class] == nullptr);
  void* chunk = std::malloc(kChunkBytes);
  if (chunk == nullptr) return false;
  chunks_.push_back(chunk);
  const std::size_t block_bytes = (size_class + 1) * kGranularity;
  auto* bytes = static_cast<char*>(chunk);
  for (std::size_t offset = 0; offset + block_bytes <= kChunkBytes; offset += block_bytes) {
    auto* block = reinterpret_cast<FreeBlock*>(bytes + offset);
    block->next = free_[size_class];
    free_[size_class] = block;
  }
  return true;
}

void* SmallBlockPool::take(std::size_t size) {
  TURNSTILE_CHECK(size > 0 && is_small(size));
  const std::size_t size_class = class_of(size);
  if (free_[size_class] == nullptr && !refill(size_class)) return nullptr;
  FreeBlock* block = free_[size_class];
  TURNSTILE_CHECK(block != nullptr);
  free_[size_class] = block->next;
  return block;
}

void SmallBlockPool::release(void* block, std::size_t size) {
  if (is_small(size)) {
    TURNSTILE_CHECK(block != nullptr && size > 0);
    give_back(block, size);
  } else {
    std::free(block);
  }
}

void* SmallBlockPool::reallocate_rarely(void* block, std::size_t old_size, std::size_t new_size) {
  if (block == nullptr) old_size = 0;
  if (new_size == 0) {
    if (block != nullptr) release(block, old_size);
    return nullptr;
  }
  if (block != nullptr && is_small(old_size) == is_small(new_size)) {
    if (!is_small(new_size)) return std::realloc(block, new_size);
    if (class_of(old_size) == class_of(new_size)) return block;
  }
  void* moved = is_small(new_size) ? take(new_size) : std::malloc(new_size);
  if (moved == nullptr) {
    // Lua relies on shrinking never failing; a small block's chunk could
    // not be had: nothing sensible is left to do.
    if (new_size < old_size) std::abort();
    return nullptr;
  }
  if (block != nullptr) {
    std::memcpy(moved, block, std::min(old_size, new_size));
    release(block, old_size);
  }
  return moved;
}

}  // namespace turnstile::sim
