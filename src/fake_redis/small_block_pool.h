// fake_redis/small_block_pool.h
//
// The Lua state's allocator for small blocks. Every script run creates and
// drops a few dozen small objects (strings, the KEYS and ARGV tables, status
// reply tables, closures); malloc and free of each were a tenth of an
// EVALSHA. Blocks of up to kMaxBytes come from per-size free lists carved
// out of large chunks, which are only given back when the pool dies (after
// lua_close). Larger blocks go to malloc. A block's size, which Lua always
// passes back, says where it came from.

#ifndef TURNSTILE_FAKE_REDIS_SMALL_BLOCK_POOL_H_
#define TURNSTILE_FAKE_REDIS_SMALL_BLOCK_POOL_H_

#include <array>
#include <cstddef>
#include <vector>

namespace turnstile::sim {

class SmallBlockPool {
 public:
  static constexpr std::size_t kGranularity = 16;
  static constexpr std::size_t kMaxBytes = 512;

  SmallBlockPool() = default;
  ~SmallBlockPool();
  SmallBlockPool(const SmallBlockPool&) = delete;
  SmallBlockPool& operator=(const SmallBlockPool&) = delete;

  // lua_Alloc's contract: `block` of `old_size` bytes (null, 0 for a new
  // one) becomes `new_size` bytes, contents kept up to the smaller size;
  // new_size 0 frees it and returns null. Null when memory runs out while
  // growing; shrinking never fails.
  // The two commonest calls (a new small block, a small block freed) are
  // served inline; the rest by reallocate_rarely().
  void* reallocate(void* block, std::size_t old_size, std::size_t new_size) {
    if (block == nullptr) {
      if (new_size != 0 && is_small(new_size)) {
        if (FreeBlock* taken = free_[class_of(new_size)]) {
          free_[class_of(new_size)] = taken->next;
          return taken;
        }
      }
    } else if (new_size == 0 && old_size != 0 && is_small(old_size)) {
      give_back(block, old_size);
      return nullptr;
    }
    return reallocate_rarely(block, old_size, new_size);
  }

 private:
  struct FreeBlock {
    FreeBlock* next;
  };
  static constexpr std::size_t kClasses = kMaxBytes / kGranularity;
  static constexpr std::size_t kChunkBytes = std::size_t{64} << 10;

  static bool is_small(std::size_t size) { return size <= kMaxBytes; }
  static std::size_t class_of(std::size_t size) { return (size - 1) / kGranularity; }

  void* take(std::size_t size);  // a small block, null if out of memory
  void give_back(void* block, std::size_t size) {
    auto* freed = static_cast<FreeBlock*>(block);
    freed->next = free_[class_of(size)];
    free_[class_of(size)] = freed;
  }
  void* reallocate_rarely(void* block, std::size_t old_size, std::size_t new_size);
  void release(void* block, std::size_t size);  // to the pool or to malloc
  bool refill(std::size_t size_class);

  std::array<FreeBlock*, kClasses> free_{};
  std::vector<void*> chunks_;
};

}  // namespace turnstile::sim

#endif  // TURNSTILE_FAKE_REDIS_SMALL_BLOCK_POOL_H_
