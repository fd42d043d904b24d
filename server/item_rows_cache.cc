#include "server/item_rows_cache.h"

#include <cstddef>
#include <cstring>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace tf_reverb {
namespace {

// The marker of an item not to be cached: an address no allocation has.
const char kNotCached = 0;

void Free(const char* block) {
  if (block != nullptr && block != &kNotCached) delete[] block;
}

}  // namespace

ItemRowsCache& ItemRowsCache::operator=(const ItemRowsCache& other) {
  if (this != &other) Free(block_.exchange(nullptr, std::memory_order_acq_rel));
  return *this;
}

ItemRowsCache::~ItemRowsCache() { Free(block_.load(std::memory_order_acquire)); }

const char* ItemRowsCache::Install(const std::optional<std::string>& value) const {
  const char* block = &kNotCached;
  if (value.has_value() && !value->empty()) {
    const size_t size = value->size();
    char* bytes = new char[sizeof(size_t) + size];
    std::memcpy(bytes, &size, sizeof(size_t));
    std::memcpy(bytes + sizeof(size_t), value->data(), size);
    block = bytes;
  }
  const char* expected = nullptr;
  if (block_.compare_exchange_strong(expected, block, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
    return block;
  }
  Free(block);  // another thread installed first
  return expected;
}

absl::string_view ItemRowsCache::View(const char* block) {
  if (block == nullptr || block == &kNotCached) return absl::string_view();
  size_t size = 0;
  std::memcpy(&size, block, sizeof(size_t));
  return absl::string_view(block + sizeof(size_t), size);
}

}  // namespace tf_reverb
