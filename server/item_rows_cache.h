// ItemRowsCache: an item's columns decoded once and kept beside the item,
// for the batched sample responses (server/service/sample_batch.h).
//
// A table keeps an item's data compressed in its chunks (table_chunk.h),
// while a SampleBatch carries it decoded. For small items, finding and
// decoding an item's chunks costs far more than its bytes: each of its
// chunks is a separate allocation, one cache miss or two, and a Snappy
// block to decode. The first batched sample of such an item decodes it once
// into this cache, one allocation; later samples copy from there. What is
// kept, and for which items, is the encoder's decision: the cache stores
// one byte string, or the verdict that the item is not to be cached.
//
// Contract: thread-safe. Get may be called from any number of threads at
// once: each thread that finds the cache empty decodes, the first to finish
// installs its result and the others drop theirs and use it. A value never
// changes once installed and lives as long as the cache. A copy of a cache
// starts empty (a TableItem copied to change its record decodes again).
// A decoder's error is returned and nothing is cached.
#ifndef TF_REVERB_SERVER_ITEM_ROWS_CACHE_H_
#define TF_REVERB_SERVER_ITEM_ROWS_CACHE_H_

#include <atomic>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tf_reverb {

class ItemRowsCache {
 public:
  ItemRowsCache() = default;
  ItemRowsCache(const ItemRowsCache& /*other*/) {}
  ItemRowsCache& operator=(const ItemRowsCache& other);
  ~ItemRowsCache();

  // The cached bytes, never empty; an empty view when the item is not to be
  // cached. When nothing is known yet, runs `decode` (a callable returning
  // absl::StatusOr<std::optional<std::string>>: nullopt for "not to be
  // cached", else a non-empty string) and installs its result.
  template <typename Decode>
  absl::StatusOr<absl::string_view> Get(Decode decode) const {
    const char* block = block_.load(std::memory_order_acquire);
    if (block == nullptr) {
      absl::StatusOr<std::optional<std::string>> decoded = decode();
      if (!decoded.ok()) return decoded.status();
      block = Install(*decoded);
    }
    return View(block);
  }

  // The cached bytes if there are any yet, else an empty view; never decodes.
  absl::string_view Peek() const { return View(block_.load(std::memory_order_acquire)); }

 private:
  // Installs a block holding `value` (the not-cached marker for nullopt)
  // unless another thread installed one first; returns the block installed.
  const char* Install(const std::optional<std::string>& value) const;
  // The bytes of `block`: empty for null and the not-cached marker.
  static absl::string_view View(const char* block);

  // Null (unknown), the not-cached marker, or one allocation holding the
  // size (a size_t) and then the bytes.
  mutable std::atomic<const char*> block_{nullptr};
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_ITEM_ROWS_CACHE_H_
