#include "server/wal/write_ahead_log.h"

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "server/checkpointing/record_io.h"

namespace tf_reverb {
namespace {

namespace fs = std::filesystem;

using deepmind::reverb::WalRecord;

constexpr char kSegmentPrefix[] = "wal-";
constexpr char kSegmentSuffix[] = ".log";
constexpr char kFileKind[] = "Write-ahead log file";

std::string SegmentName(uint64_t first) {
  return absl::StrFormat("%s%020u%s", kSegmentPrefix, first, kSegmentSuffix);
}

// The first sequence number in a segment's name; nullopt for other files.
std::optional<uint64_t> SegmentFirst(const std::string& name) {
  const size_t prefix = sizeof(kSegmentPrefix) - 1;
  const size_t suffix = sizeof(kSegmentSuffix) - 1;
  if (name.size() != prefix + 20 + suffix || name.rfind(kSegmentPrefix, 0) != 0 ||
      name.compare(prefix + 20, suffix, kSegmentSuffix) != 0) {
    return std::nullopt;
  }
  uint64_t first = 0;
  if (!absl::SimpleAtoi(name.substr(prefix, 20), &first)) return std::nullopt;
  return first;
}

absl::Status IoError(const std::string& action, const std::string& path, int error) {
  return absl::UnavailableError(
      absl::StrCat("Write-ahead log: cannot ", action, " ", path, ": ", std::strerror(error)));
}

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return IoError("open", dir, errno);
  const int result = fsync(fd);
  const int error = errno;
  close(fd);
  if (result != 0) return IoError("sync", dir, error);
  return absl::OkStatus();
}

// Appends `value` as a protobuf varint.
void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>(value | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// Whether `path` holds only zero bytes from `offset` on (pages a host crash
// allocated but never wrote).
bool ZerosFrom(const std::string& path, int64_t offset) {
  FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return false;
  bool zeros = std::fseek(file, offset, SEEK_SET) == 0;
  char buffer[1 << 16];
  size_t got;
  while (zeros && (got = std::fread(buffer, 1, sizeof(buffer), file)) > 0) {
    for (size_t i = 0; i < got && zeros; ++i) zeros = buffer[i] == 0;
  }
  std::fclose(file);
  return zeros;
}

absl::Status TruncateDurably(const std::string& path, int64_t size) {
  const int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return IoError("open", path, errno);
  const bool ok = ftruncate(fd, size) == 0 && fsync(fd) == 0;
  const int error = errno;
  close(fd);
  if (!ok) return IoError("truncate", path, error);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<WalDurability> ParseWalDurability(const std::string& text) {
  if (text == "sync") return WalDurability::kSync;
  if (text == "async") return WalDurability::kAsync;
  return absl::InvalidArgumentError(
      absl::StrCat("Unknown write-ahead log durability '", text, "' (expected sync or async)"));
}

const char* WalDurabilityName(WalDurability durability) {
  return durability == WalDurability::kSync ? "sync" : "async";
}

absl::StatusOr<std::unique_ptr<WriteAheadLog>> WriteAheadLog::Open(std::string dir,
                                                                   WalOptions options) {
  if (dir.empty()) return absl::InvalidArgumentError("The write-ahead log needs a directory");
  if (options.segment_bytes < 1 || options.fsync_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "Write-ahead log: segment_bytes and fsync_interval must be positive");
  }
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("Write-ahead log: cannot create ", dir, ": ", error.message()));
  }
  std::vector<Segment> segments;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::optional<uint64_t> first = SegmentFirst(it->path().filename().string());
    if (!first.has_value() || !it->is_regular_file()) continue;
    const uintmax_t size = fs::file_size(it->path(), error);
    if (error) break;
    segments.push_back(Segment{*first, it->path().string(), static_cast<int64_t>(size)});
  }
  if (error) {
    return absl::InternalError(
        absl::StrCat("Write-ahead log: cannot list ", dir, ": ", error.message()));
  }
  std::sort(segments.begin(), segments.end(),
            [](const Segment& a, const Segment& b) { return a.first_sequence < b.first_sequence; });
  return std::unique_ptr<WriteAheadLog>(
      new WriteAheadLog(std::move(dir), options, std::move(segments)));
}

WriteAheadLog::WriteAheadLog(std::string dir, WalOptions options, std::vector<Segment> segments)
    : dir_(std::move(dir)), options_(options) {
  int64_t bytes = 0;
  for (const Segment& segment : segments) bytes += segment.bytes;
  metrics_.segments.store(static_cast<int64_t>(segments.size()), std::memory_order_relaxed);
  metrics_.disk_bytes.store(bytes, std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  segments_.assign(segments.begin(), segments.end());
}

WriteAheadLog::~WriteAheadLog() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (writer_.joinable()) writer_.join();
  {
    absl::MutexLock write(&write_mu_);
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  Confirm(0, absl::UnavailableError("Write-ahead log: closed before the record was written")).Run();
}

absl::StatusOr<WalReplayReport> WriteAheadLog::Replay(
    const std::function<absl::Status(WalRecord&)>& visit) {
  std::vector<Segment> segments;
  {
    absl::MutexLock lock(&mu_);
    segments.assign(segments_.begin(), segments_.end());
  }
  WalReplayReport report;
  report.segments = static_cast<int64_t>(segments.size());
  if (!segments.empty()) report.first_sequence = segments.front().first_sequence;
  uint64_t last = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& segment = segments[i];
    // Segments continue one another: a gap is a lost segment (or records
    // lost at the end of one).
    if (last > 0 && segment.first_sequence != last + 1) {
      return absl::DataLossError(
          absl::StrCat(kFileKind, " ", segment.path, " starts at record ", segment.first_sequence,
                       " but the log before it ends at ", last, ": records are missing"));
    }
    absl::StatusOr<std::unique_ptr<RecordReader>> reader =
        RecordReader::Open(segment.path, kFileKind, /*may_be_compressed=*/false);
    if (!reader.ok()) return reader.status();
    uint64_t expected = segment.first_sequence;
    while (true) {
      const int64_t offset = (*reader)->offset();
      WalRecord record;
      absl::Status status = (*reader)->ReadMessage(&record);
      if (absl::IsOutOfRange(status)) break;
      if (!status.ok()) {
        const bool last = i + 1 == segments.size();
        if (!last || !((*reader)->last_read_torn() || ZerosFrom(segment.path, offset))) {
          return status;
        }
        // A write the crash cut short (or left as zeroed pages): never
        // confirmed, so dropped, durably.
        if (absl::Status s = TruncateDurably(segment.path, offset); !s.ok()) return s;
        report.torn = std::string(status.message());
        absl::MutexLock lock(&mu_);
        metrics_.disk_bytes.fetch_sub(segments_.back().bytes - offset, std::memory_order_relaxed);
        segments_.back().bytes = offset;
        break;
      }
      if (record.sequence() != expected) {
        return absl::DataLossError(
            absl::StrCat(kFileKind, " ", segment.path, " is corrupt at byte ", offset, ": record ",
                         record.sequence(), " where ", expected, " was due"));
      }
      last = expected++;
      ++report.records;
      if (absl::Status s = visit(record); !s.ok()) return s;
    }
  }
  report.last_sequence = last;
  absl::MutexLock lock(&mu_);
  next_sequence_ = std::max(next_sequence_, last + 1);
  if (!segments_.empty()) {
    next_sequence_ = std::max(next_sequence_, segments_.back().first_sequence);
  }
  confirmed_ = next_sequence_ - 1;
  return report;
}

void WriteAheadLog::AdvanceTo(uint64_t sequence) {
  absl::MutexLock lock(&mu_);
  next_sequence_ = std::max(next_sequence_, sequence);
}

absl::Status WriteAheadLog::Start() {
  uint64_t first;
  {
    absl::MutexLock lock(&mu_);
    first = next_sequence_;
    confirmed_ = first - 1;
    // An empty segment of that name (a start that appended nothing) is
    // reused rather than listed twice.
    if (!segments_.empty() && segments_.back().first_sequence == first) segments_.pop_back();
  }
  {
    absl::MutexLock write(&write_mu_);
    last_sync_ = absl::Now();
    if (absl::Status s = OpenSegment(first); !s.ok()) return s;
  }
  writer_ = std::thread([this]() {
    writer_id_.store(std::this_thread::get_id());
    WriterLoop();
  });
  return absl::OkStatus();
}

absl::Status WriteAheadLog::OpenSegment(uint64_t first) {
  const std::string path = (fs::path(dir_) / SegmentName(first)).string();
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("create", path, errno);
  if (absl::Status s = SyncDirectory(dir_); !s.ok()) {
    close(fd);
    return s;
  }
  const off_t size = lseek(fd, 0, SEEK_END);
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
  absl::MutexLock lock(&mu_);
  segments_.push_back(Segment{first, path, size > 0 ? static_cast<int64_t>(size) : 0});
  metrics_.segments.store(static_cast<int64_t>(segments_.size()), std::memory_order_relaxed);
  return absl::OkStatus();
}

uint64_t WriteAheadLog::Append(WalChange change) {
  absl::MutexLock lock(&mu_);
  const uint64_t sequence = next_sequence_++;
  pending_.push_back(Pending{sequence, std::move(change)});
  metrics_.records.fetch_add(1, std::memory_order_relaxed);
  return sequence;
}

uint64_t WriteAheadLog::last_sequence() const {
  absl::MutexLock lock(&mu_);
  return next_sequence_ - 1;
}

bool WriteAheadLog::Confirmed(uint64_t sequence) const {
  absl::MutexLock lock(&mu_);
  return failed_.ok() && sequence <= confirmed_;
}

void WriteAheadLog::WhenConfirmed(uint64_t sequence, Confirmation done) {
  absl::Status now;
  {
    absl::MutexLock lock(&mu_);
    if (failed_.ok() && sequence > confirmed_) {
      waiters_.emplace(sequence, std::move(done));
      return;
    }
    now = failed_;
  }
  done(now);
}

absl::Status WriteAheadLog::WaitConfirmed(uint64_t sequence) {
  // kAsync: the writer thread does not wake for this wait; write now.
  if (options_.durability == WalDurability::kAsync && !Confirmed(sequence)) {
    WritePending().IgnoreError();  // a failure shows in failed_ below
  }
  struct Wait {
    const WriteAheadLog* log;
    uint64_t sequence;
  } wait{this, sequence};
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](Wait* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return !w->log->failed_.ok() || w->log->confirmed_ >= w->sequence;
      },
      &wait));
  return failed_;
}

void WriteAheadLog::ReleaseThrough(uint64_t sequence) {
  std::vector<Segment> released;
  {
    absl::MutexLock lock(&mu_);
    while (segments_.size() > 1 && segments_[1].first_sequence - 1 <= sequence) {
      released.push_back(segments_.front());
      segments_.pop_front();
    }
    metrics_.segments.store(static_cast<int64_t>(segments_.size()), std::memory_order_relaxed);
  }
  // Deleted without the lock (appends must not wait on file system calls);
  // the segments are off the list already, so nothing reads them.
  for (const Segment& segment : released) {
    std::error_code error;
    fs::remove(segment.path, error);
    metrics_.disk_bytes.fetch_sub(segment.bytes, std::memory_order_relaxed);
  }
}

void WriteAheadLog::Serialize(const std::vector<Pending>& batch, std::string* out) {
  // Each record is serialized straight into `out`: its small fields as a
  // WalRecord, then its chunk or item appended as the length-delimited field
  // it is (3 or 4), the same bytes as if it were set, without copying it
  // into the record first. A chunk's or an item's field holds its wire bytes
  // (a serialized ChunkData or PrioritizedItem) as they are.
  auto append_field = [out](int field, absl::string_view bytes) {
    out->push_back(static_cast<char>((field << 3) | 2));
    AppendVarint(bytes.size(), out);
    out->append(bytes.data(), bytes.size());
  };
  for (const Pending& pending : batch) {
    const WalChange& change = pending.change;
    WalRecord record;
    record.set_sequence(pending.sequence);
    if (change.kind != WalChange::Kind::kChunk) record.set_table(change.table);
    switch (change.kind) {
      case WalChange::Kind::kChunk:
      case WalChange::Kind::kInsert:
        break;  // appended below
      case WalChange::Kind::kUpdate:
        record.mutable_update()->set_key(change.key);
        record.mutable_update()->set_priority(change.priority);
        break;
      case WalChange::Kind::kDelete:
        record.set_delete_key(change.key);
        break;
      case WalChange::Kind::kSample:
        record.set_sample_key(change.key);
        break;
      case WalChange::Kind::kReset:
        record.set_reset(true);
        break;
      case WalChange::Kind::kPolicyVersion:
        record.set_policy_version(change.version);
        break;
    }
    const size_t begin = BeginRecordFrame(out);
    record.AppendToString(out);
    if (change.kind == WalChange::Kind::kChunk) {
      append_field(WalRecord::kChunkFieldNumber, change.chunk->wire());
    } else if (change.kind == WalChange::Kind::kInsert) {
      append_field(WalRecord::kInsertFieldNumber, change.item.wire());
    }
    EndRecordFrame(begin, out);
  }
}

absl::Status WriteAheadLog::WriteAll(const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string path;
      {
        absl::MutexLock lock(&mu_);
        path = segments_.back().path;
      }
      return IoError("write", path, n < 0 ? errno : ENOSPC);
    }
    done += static_cast<size_t>(n);
  }
  metrics_.written_bytes.fetch_add(static_cast<int64_t>(bytes.size()), std::memory_order_relaxed);
  metrics_.disk_bytes.fetch_add(static_cast<int64_t>(bytes.size()), std::memory_order_relaxed);
  absl::MutexLock lock(&mu_);
  segments_.back().bytes += static_cast<int64_t>(bytes.size());
  return absl::OkStatus();
}

absl::Status WriteAheadLog::Sync() {
  const absl::Time start = absl::Now();
  if (fdatasync(fd_) != 0) {
    const int error = errno;
    absl::MutexLock lock(&mu_);
    return IoError("sync", segments_.back().path, error);
  }
  metrics_.fsyncs.fetch_add(1, std::memory_order_relaxed);
  metrics_.fsync_seconds.Observe(absl::ToDoubleSeconds(absl::Now() - start));
  unsynced_ = false;
  last_sync_ = absl::Now();
  return absl::OkStatus();
}

bool WriteAheadLog::HasWorkLocked() const {
  if (stopping_) return true;
  if (pending_.empty()) return false;
  // kAsync: confirming callers write their records themselves
  // (WritePending), so the thread wakes at once only for records someone
  // waits for; the others (samples, updates) it writes at the interval.
  // Waking it for every record cost a context switch per insert.
  return options_.durability == WalDurability::kSync || !waiters_.empty();
}

void WriteAheadLog::Due::Run() {
  for (Confirmation& done : calls) done(status);
  calls.clear();
}

absl::Status WriteAheadLog::WritePending() {
  Due due;
  absl::Status status;
  {
    absl::MutexLock write(&write_mu_);
    WritePendingLocked(&due);
    status = due.status;
  }
  due.Run();
  return status;
}

void WriteAheadLog::WritePendingLocked(Due* due) {
  std::vector<Pending> batch;
  {
    absl::MutexLock lock(&mu_);
    batch.swap(pending_);
  }
  if (batch.empty()) return;
  absl::Status status;
  if (io_failed_) {
    status = absl::UnavailableError("Write-ahead log: failed before");
  } else {
    io_bytes_.clear();
    Serialize(batch, &io_bytes_);
    metrics_.batch_records.Observe(static_cast<double>(batch.size()));
    status = WriteAll(io_bytes_);
    if (status.ok()) {
      if (options_.durability == WalDurability::kSync) {
        status = Sync();
      } else {
        unsynced_ = true;
      }
    }
    bool rotate = false;
    if (status.ok()) {
      absl::MutexLock lock(&mu_);
      rotate = segments_.back().bytes >= options_.segment_bytes;
    }
    if (rotate) {
      if (unsynced_) status = Sync();
      if (status.ok()) status = OpenSegment(batch.back().sequence + 1);
    }
    if (!status.ok()) {
      io_failed_ = true;
      metrics_.failures.fetch_add(1, std::memory_order_relaxed);
    }
  }
  *due = Confirm(batch.back().sequence, status);
}

void WriteAheadLog::WriterLoop() {
  while (true) {
    bool unsynced;
    absl::Time sync_due;
    {
      absl::MutexLock write(&write_mu_);
      // After a failure nothing is synced any more: waiting for a sync
      // that is due would spin.
      unsynced = unsynced_ && !io_failed_;
      sync_due = last_sync_ + options_.fsync_interval;
    }
    bool stop;
    {
      absl::MutexLock lock(&mu_);
      const absl::Condition work(this, &WriteAheadLog::HasWorkLocked);
      if (options_.durability == WalDurability::kAsync) {
        // Another thread may write (WritePending) while this one waits: look
        // again within an interval either way.
        mu_.AwaitWithDeadline(work, unsynced ? sync_due : absl::Now() + options_.fsync_interval);
      } else {
        mu_.Await(work);
      }
      stop = stopping_ && pending_.empty();
    }
    Due written;
    Due failed;
    {
      absl::MutexLock write(&write_mu_);
      WritePendingLocked(&written);
      // kAsync: what was written reaches the disk at least every interval.
      if (unsynced_ && !io_failed_ &&
          (stop || absl::Now() >= last_sync_ + options_.fsync_interval)) {
        if (absl::Status s = Sync(); !s.ok()) {
          io_failed_ = true;
          metrics_.failures.fetch_add(1, std::memory_order_relaxed);
          failed = Confirm(0, s);
        }
      }
    }
    written.Run();
    failed.Run();
    if (stop) return;
  }
}

WriteAheadLog::Due WriteAheadLog::Confirm(uint64_t sequence, const absl::Status& error) {
  Due due;
  absl::MutexLock lock(&mu_);
  if (!error.ok() && failed_.ok()) failed_ = error;
  if (failed_.ok()) {
    confirmed_ = std::max(confirmed_, sequence);
    auto end = waiters_.upper_bound(confirmed_);
    for (auto it = waiters_.begin(); it != end; ++it) due.calls.push_back(std::move(it->second));
    waiters_.erase(waiters_.begin(), end);
  } else {
    for (auto& [unused, done] : waiters_) due.calls.push_back(std::move(done));
    waiters_.clear();
  }
  due.status = failed_;
  return due;
}

}  // namespace tf_reverb
