// InsertStreamHandler: the server side of one InsertStream
// (reverb-spec.md §4.2), without the transport: the service feeds it parsed
// requests and writes the confirmations it returns; the fuzzer
// (server/fuzz/) drives the same code directly.
//
// Per request, in the protocol's order: every chunk is validated
// (chunk_validation.h) before anything of the request is inserted, then
// stored by key for the rest of the stream (a chunk key sent again keeps the
// first copy); the items are inserted in order, each into its table
// (Table::InsertOrAssign checks its slices against its chunks and the
// table's signature); finally only the chunks named in keep_chunk_keys stay
// (in requests with items; a request of chunks only just adds them).
//
// Contract:
//  * Thread-safety: not thread-safe; one handler per stream, used by one
//    thread at a time. The tables it inserts into are thread-safe.
//  * Ownership: owns the stream's chunks (shared with the tables' items).
//  * Errors end the stream; items confirmed before stay in their tables:
//    INVALID_ARGUMENT for an empty request, a chunk ValidateChunk rejects, an
//    item naming a chunk this stream does not hold or one the table rejects;
//    NOT_FOUND for an unknown table; FAILED_PRECONDITION when keep_chunk_keys
//    names chunks the stream does not hold; the table's DEADLINE_EXCEEDED /
//    CANCELLED as they are.
#ifndef TF_REVERB_SERVER_INSERT_STREAM_H_
#define TF_REVERB_SERVER_INSERT_STREAM_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reverb_service.pb.h"
#include "table.h"

namespace tf_reverb {

class InsertStreamHandler {
 public:
  using TableLookup =
      std::function<absl::StatusOr<std::shared_ptr<Table>>(const std::string& name)>;
  // Sends the keys confirmed so far (and clears them) because the next insert
  // would block in the table's rate limiter; false when the client is gone.
  using Flush = std::function<bool(std::vector<uint64_t>* confirmed)>;

  // `cancelled` (may be null) makes a blocked insert return early; while a
  // table call runs, `calls_in_tables` (may be null) is incremented.
  InsertStreamHandler(TableLookup tables, std::function<bool()> cancelled,
                      std::atomic<int>* calls_in_tables = nullptr);

  // Handles one request; appends the keys of the items inserted to
  // `confirmed`. A false `flush` ends the request early with OK (the client
  // went away).
  absl::Status Handle(deepmind::reverb::InsertStreamRequest* request,
                      std::vector<uint64_t>* confirmed, const Flush& flush);

  // Chunks held for later items.
  size_t num_chunks() const { return chunks_.size(); }

 private:
  absl::StatusOr<TableItem> MakeItem(deepmind::reverb::PrioritizedItem* item) const;

  TableLookup tables_;
  std::function<bool()> cancelled_;
  std::atomic<int>* calls_in_tables_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const ChunkData>> chunks_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_INSERT_STREAM_H_
