// KeepFreedHeapMapped: a process-wide glibc malloc setting for processes that
// stream large samples (the sampling client, the server).
//
// Why: a sampler holds tens of MB of received chunks (gRPC receive slices)
// and batch tensors at once and frees them in waves. With glibc's default,
// dynamic trim threshold each wave hands the top of a heap back to the
// kernel (madvise/brk), and the next wave's kernel receive copy faults every
// page back in: measured 60-100 minor faults per MB sampled and ~25% less
// throughput for 282 KB items (benchmarks/sample_throughput.py --frames_only).
// Raising the trim threshold to kTrimThresholdBytes keeps up to that much
// freed memory per heap mapped for reuse, and fixing the mmap threshold at
// kMmapThresholdBytes (where glibc's dynamic threshold ends up anyway once
// such blocks were freed) serves blocks below it from those heaps instead
// of from fresh mappings.
//
// Contract:
//  * Thread-safety: thread-safe; the setting is applied at most once per
//    process (later calls return at once).
//  * Scope: mallopt(M_TRIM_THRESHOLD), mallopt(M_MMAP_THRESHOLD) affect the
//    whole process: it keeps up to 64 MiB of freed memory per heap mapped,
//    so its resident size stays near its high-water mark.
//  * Opt-out: nothing is changed off glibc, when TF_REVERB_MALLOC_TUNING=0,
//    or when the user configured the trim threshold already
//    (MALLOC_TRIM_THRESHOLD_, or glibc.malloc.trim_threshold in
//    GLIBC_TUNABLES): their choice wins. The mmap threshold is then left
//    alone too.
//  * Returns whether this call (or an earlier one) applied the setting.
#ifndef TF_REVERB_SERVER_CLIENT_HEAP_TUNING_H_
#define TF_REVERB_SERVER_CLIENT_HEAP_TUNING_H_

#include <cstddef>

namespace tf_reverb {

// 64 MiB: a glibc thread heap's largest size, so thread heaps are never
// trimmed; the main heap keeps at most this much free memory mapped.
inline constexpr size_t kTrimThresholdBytes = size_t{64} << 20;
// 32 MiB: the largest mmap threshold glibc accepts on 64-bit.
inline constexpr size_t kMmapThresholdBytes = size_t{32} << 20;

bool KeepFreedHeapMapped();

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_CLIENT_HEAP_TUNING_H_
