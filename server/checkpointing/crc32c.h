// CRC32C (Castagnoli) and TFRecord's masked form of it.
//
// Contract: pure functions, thread-safe.
#ifndef TF_REVERB_SERVER_CHECKPOINTING_CRC32C_H_
#define TF_REVERB_SERVER_CHECKPOINTING_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace tf_reverb {

// CRC32C of `size` bytes, continuing from `crc` (0 to start).
uint32_t Crc32c(const void* data, size_t size, uint32_t crc = 0);

// The masked CRC that TFRecord framing stores.
inline uint32_t MaskCrc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CHECKPOINTING_CRC32C_H_
