// ThreadSanitizer support for Debian's (uninstrumented) absl::Mutex, linked
// into every C++ test (empty unless built with --config=tsan).
//
// The system libabsl_synchronization.so is not built with TSAN, so TSAN does
// not see absl::Mutex create happens-before edges and reports every access
// guarded by one as a race. Under --config=tsan this block interposes the
// exported Mutex/CondVar entry points (the executable's definitions win
// symbol resolution over the .so's), forwards to the real ones (RTLD_NEXT)
// and tells TSAN about the acquire/release they perform.
#if defined(__SANITIZE_THREAD__)
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include "absl/synchronization/mutex.h"

namespace tsan_absl_shim {

template <typename F>
F Real(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f == nullptr) abort();
  return reinterpret_cast<F>(f);
}

using absl::Condition;
using absl::Duration;
using absl::Mutex;
using absl::Time;

#define TSAN_SHIM_NAME_Lock "_ZN4absl7debian35Mutex4LockEv"
#define TSAN_SHIM_NAME_Unlock "_ZN4absl7debian35Mutex6UnlockEv"
#define TSAN_SHIM_NAME_TryLock "_ZN4absl7debian35Mutex7TryLockEv"
#define TSAN_SHIM_NAME_ReaderLock "_ZN4absl7debian35Mutex10ReaderLockEv"
#define TSAN_SHIM_NAME_ReaderUnlock "_ZN4absl7debian35Mutex12ReaderUnlockEv"
#define TSAN_SHIM_NAME_ReaderTryLock "_ZN4absl7debian35Mutex13ReaderTryLockEv"
#define TSAN_SHIM_NAME_Await "_ZN4absl7debian35Mutex5AwaitERKNS0_9ConditionE"
#define TSAN_SHIM_NAME_AwaitWithTimeout \
  "_ZN4absl7debian35Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE"
#define TSAN_SHIM_NAME_AwaitWithDeadline \
  "_ZN4absl7debian35Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE"
#define TSAN_SHIM_NAME_LockWhen "_ZN4absl7debian35Mutex8LockWhenERKNS0_9ConditionE"
#define TSAN_SHIM_NAME_LockWhenWithTimeout \
  "_ZN4absl7debian35Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE"
#define TSAN_SHIM_NAME_LockWhenWithDeadline \
  "_ZN4absl7debian35Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE"
#define TSAN_SHIM_NAME_ReaderLockWhen "_ZN4absl7debian35Mutex14ReaderLockWhenERKNS0_9ConditionE"
#define TSAN_SHIM_NAME_CondVarWait "_ZN4absl7debian37CondVar4WaitEPNS0_5MutexE"
#define TSAN_SHIM_NAME_CondVarWaitWithTimeout \
  "_ZN4absl7debian37CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE"
#define TSAN_SHIM_NAME_CondVarWaitWithDeadline \
  "_ZN4absl7debian37CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE"

extern "C" {
void ShimLock(Mutex* mu) __asm__(TSAN_SHIM_NAME_Lock);
void ShimLock(Mutex* mu) {
  static auto real = Real<void (*)(Mutex*)>(TSAN_SHIM_NAME_Lock);
  real(mu);
  __tsan_acquire(mu);
}
void ShimUnlock(Mutex* mu) __asm__(TSAN_SHIM_NAME_Unlock);
void ShimUnlock(Mutex* mu) {
  static auto real = Real<void (*)(Mutex*)>(TSAN_SHIM_NAME_Unlock);
  __tsan_release(mu);
  real(mu);
}
bool ShimTryLock(Mutex* mu) __asm__(TSAN_SHIM_NAME_TryLock);
bool ShimTryLock(Mutex* mu) {
  static auto real = Real<bool (*)(Mutex*)>(TSAN_SHIM_NAME_TryLock);
  const bool locked = real(mu);
  if (locked) __tsan_acquire(mu);
  return locked;
}
void ShimReaderLock(Mutex* mu) __asm__(TSAN_SHIM_NAME_ReaderLock);
void ShimReaderLock(Mutex* mu) {
  static auto real = Real<void (*)(Mutex*)>(TSAN_SHIM_NAME_ReaderLock);
  real(mu);
  __tsan_acquire(mu);
}
void ShimReaderUnlock(Mutex* mu) __asm__(TSAN_SHIM_NAME_ReaderUnlock);
void ShimReaderUnlock(Mutex* mu) {
  static auto real = Real<void (*)(Mutex*)>(TSAN_SHIM_NAME_ReaderUnlock);
  __tsan_release(mu);
  real(mu);
}
bool ShimReaderTryLock(Mutex* mu) __asm__(TSAN_SHIM_NAME_ReaderTryLock);
bool ShimReaderTryLock(Mutex* mu) {
  static auto real = Real<bool (*)(Mutex*)>(TSAN_SHIM_NAME_ReaderTryLock);
  const bool locked = real(mu);
  if (locked) __tsan_acquire(mu);
  return locked;
}
void ShimAwait(Mutex* mu, const Condition& c) __asm__(TSAN_SHIM_NAME_Await);
void ShimAwait(Mutex* mu, const Condition& c) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(TSAN_SHIM_NAME_Await);
  __tsan_release(mu);
  real(mu, c);
  __tsan_acquire(mu);
}
bool ShimAwaitWithTimeout(Mutex* mu, const Condition& c,
                          Duration d) __asm__(TSAN_SHIM_NAME_AwaitWithTimeout);
bool ShimAwaitWithTimeout(Mutex* mu, const Condition& c, Duration d) {
  static auto real =
      Real<bool (*)(Mutex*, const Condition&, Duration)>(TSAN_SHIM_NAME_AwaitWithTimeout);
  __tsan_release(mu);
  const bool r = real(mu, c, d);
  __tsan_acquire(mu);
  return r;
}
bool ShimAwaitWithDeadline(Mutex* mu, const Condition& c,
                           Time t) __asm__(TSAN_SHIM_NAME_AwaitWithDeadline);
bool ShimAwaitWithDeadline(Mutex* mu, const Condition& c, Time t) {
  static auto real =
      Real<bool (*)(Mutex*, const Condition&, Time)>(TSAN_SHIM_NAME_AwaitWithDeadline);
  __tsan_release(mu);
  const bool r = real(mu, c, t);
  __tsan_acquire(mu);
  return r;
}
void ShimLockWhen(Mutex* mu, const Condition& c) __asm__(TSAN_SHIM_NAME_LockWhen);
void ShimLockWhen(Mutex* mu, const Condition& c) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(TSAN_SHIM_NAME_LockWhen);
  real(mu, c);
  __tsan_acquire(mu);
}
bool ShimLockWhenWithTimeout(Mutex* mu, const Condition& c,
                             Duration d) __asm__(TSAN_SHIM_NAME_LockWhenWithTimeout);
bool ShimLockWhenWithTimeout(Mutex* mu, const Condition& c, Duration d) {
  static auto real =
      Real<bool (*)(Mutex*, const Condition&, Duration)>(TSAN_SHIM_NAME_LockWhenWithTimeout);
  const bool r = real(mu, c, d);
  __tsan_acquire(mu);
  return r;
}
bool ShimLockWhenWithDeadline(Mutex* mu, const Condition& c,
                              Time t) __asm__(TSAN_SHIM_NAME_LockWhenWithDeadline);
bool ShimLockWhenWithDeadline(Mutex* mu, const Condition& c, Time t) {
  static auto real =
      Real<bool (*)(Mutex*, const Condition&, Time)>(TSAN_SHIM_NAME_LockWhenWithDeadline);
  const bool r = real(mu, c, t);
  __tsan_acquire(mu);
  return r;
}
void ShimReaderLockWhen(Mutex* mu, const Condition& c) __asm__(TSAN_SHIM_NAME_ReaderLockWhen);
void ShimReaderLockWhen(Mutex* mu, const Condition& c) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(TSAN_SHIM_NAME_ReaderLockWhen);
  real(mu, c);
  __tsan_acquire(mu);
}
void ShimCondVarWait(absl::CondVar* cv, Mutex* mu) __asm__(TSAN_SHIM_NAME_CondVarWait);
void ShimCondVarWait(absl::CondVar* cv, Mutex* mu) {
  static auto real = Real<void (*)(absl::CondVar*, Mutex*)>(TSAN_SHIM_NAME_CondVarWait);
  __tsan_release(mu);
  real(cv, mu);
  __tsan_acquire(mu);
}
bool ShimCondVarWaitWithTimeout(absl::CondVar* cv, Mutex* mu,
                                Duration d) __asm__(TSAN_SHIM_NAME_CondVarWaitWithTimeout);
bool ShimCondVarWaitWithTimeout(absl::CondVar* cv, Mutex* mu, Duration d) {
  static auto real =
      Real<bool (*)(absl::CondVar*, Mutex*, Duration)>(TSAN_SHIM_NAME_CondVarWaitWithTimeout);
  __tsan_release(mu);
  const bool r = real(cv, mu, d);
  __tsan_acquire(mu);
  return r;
}
bool ShimCondVarWaitWithDeadline(absl::CondVar* cv, Mutex* mu,
                                 Time t) __asm__(TSAN_SHIM_NAME_CondVarWaitWithDeadline);
bool ShimCondVarWaitWithDeadline(absl::CondVar* cv, Mutex* mu, Time t) {
  static auto real =
      Real<bool (*)(absl::CondVar*, Mutex*, Time)>(TSAN_SHIM_NAME_CondVarWaitWithDeadline);
  __tsan_release(mu);
  const bool r = real(cv, mu, t);
  __tsan_acquire(mu);
  return r;
}
// absl evaluates Conditions inside the uninstrumented library, both in the
// waiting thread and in whichever thread unlocks, always while the mutex is
// logically held; those reads cannot be ordered by the annotations above.
// gRPC, upb and the rest of absl (deadlock graph, Status payloads, time
// parsing) are uninstrumented too: memory they hand between threads (socket
// reads/writes, slices, message buffers, shared Status payloads) carries no
// happens-before edge TSAN can see, so their interceptor calls are ignored.
const char* __tsan_default_suppressions() {
  return "race:absl::*::Condition::CastAndCallMethod\n"
         "race:absl::*::Condition::CastAndCallFunction\n"
         "race:absl::*::synchronization_internal::GraphCycles\n"
         "race:recvmsg\n"
         "race:sendmsg\n"
         "race:grpc::ProtoBufferReader\n"
         "race:grpc::ProtoBufferWriter\n"
         "race:grpc_slice_buffer\n"
         // gRPC++ header code inlined into our binaries, acting on call
         // objects the uninstrumented sync server allocates and hands over.
         "race:grpc::Server::SyncRequestThreadManager\n"
         // The callback API's call objects (inlined handler templates),
         // created, completed and deleted by the uninstrumented library.
         // race_top: only where such code is the racing access itself, so
         // that our reactors, which run below these frames, stay checked.
         "race_top:grpc::internal::CallbackBidiHandler\n"
         "race_top:grpc::internal::CallbackUnaryHandler\n"
         "race_top:grpc::internal::CallbackWithSuccessTag\n"
         "race:grpc::CompletionQueue\n"
         "race:grpc::internal::InterceptorBatchMethodsImpl\n"
         "race:grpc::internal::FillMetadataArray\n"
         "race:grpc::internal::CallOpSet\n"
         "race:grpc::internal::CallOpSendMessage\n"
         "called_from_lib:libgrpc.so\n"
         "called_from_lib:libgpr.so\n"
         "called_from_lib:libupb.so\n"
         "called_from_lib:libabsl_cord.so\n"
         "called_from_lib:libabsl_cord_internal.so\n"
         "called_from_lib:libabsl_graphcycles_internal.so\n"
         "called_from_lib:libabsl_status.so\n"
         "called_from_lib:libabsl_time.so\n";
}
}  // extern "C"

}  // namespace tsan_absl_shim
#endif  // __SANITIZE_THREAD__
