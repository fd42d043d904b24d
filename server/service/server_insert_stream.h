// ServerInsertStream: the server side of one InsertStream
// (docs/architecture/wire-protocol.md), without the transport: the service feeds it parsed
// requests and writes the confirmations it returns; the fuzzer
// (server/fuzz/) drives the same code directly.
//
// Per request, in the protocol's order: every chunk is validated
// (chunk_validation.h) before anything of the request is inserted (the
// request's parsed chunks and the chunks that came as their plain wire
// bytes, insert_request.h, alike), then
// stored by key for the rest of the stream (a chunk key sent again keeps the
// first copy); the items are inserted in order, each into its table
// (Table::InsertOrAssign checks its slices against its chunks and the
// table's signature); finally only the chunks named in keep_chunk_keys stay
// (in requests with items; a request of chunks only just adds them).
//
// Contract:
//  * Thread-safety: not thread-safe; one handler per stream, used by one
//    thread at a time. The tables it inserts into are thread-safe.
//  * Blocking: Start and Continue never block (a refused insert registers a
//    waker with its table instead); Handle is their blocking form.
//  * Ownership: owns the stream's chunks (shared with the tables' items).
//  * Errors end the stream; items confirmed before stay in their tables:
//    INVALID_ARGUMENT for an empty request, a chunk ValidateChunk rejects, an
//    item naming a chunk this stream does not hold or one the table rejects;
//    NOT_FOUND for an unknown table; FAILED_PRECONDITION when keep_chunk_keys
//    names chunks the stream does not hold; the table's DEADLINE_EXCEEDED /
//    CANCELLED as they are.
#ifndef TF_REVERB_SERVER_SERVICE_SERVER_INSERT_STREAM_H_
#define TF_REVERB_SERVER_SERVICE_SERVER_INSERT_STREAM_H_

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/table.h"
#include "server/table_chunk.h"
#include "server/table_item.h"

namespace tf_reverb {

class ServerInsertStream {
 public:
  using TableLookup =
      std::function<absl::StatusOr<std::shared_ptr<Table>>(const std::string& name)>;
  // Sends the keys confirmed so far (and clears them) because the next insert
  // would block in the table's rate limiter; false when the client is gone.
  using Flush = std::function<bool(std::vector<uint64_t>* confirmed)>;

  enum class Progress {
    kDone,     // the request is handled; the next one may Start
    kBlocked,  // the next item's table refused it for now (its waker is set)
  };

  // A chunk of the request that arrived as its plain wire bytes
  // (chunk_view.h: ChunkViewOfWire), kept as they are (TableChunk::FromPlainWire).
  struct WireChunk {
    uint64_t key = 0;
    std::string wire;
  };

  explicit ServerInsertStream(TableLookup tables);

  // Starts handling `*request`, whose chunks are request->chunks() and
  // `wire_chunks`: validates and stores them. The previous request must be
  // done (Continue returned kDone). `*request` is borrowed, not copied: it
  // must stay unchanged until Continue returns kDone or an error (the
  // service parses each request into an arena it resets then).
  absl::Status Start(const deepmind::reverb::InsertStreamRequest* request,
                     std::vector<WireChunk> wire_chunks = {});

  // Inserts the request's items in order, appending their keys to
  // `confirmed`, without blocking: kBlocked when the next item's table cannot
  // take it now, with `wake` registered there (Table::TryInsertOrAssign; call
  // Continue again once woken). kDone after the last item, with
  // keep_chunk_keys applied. An error ends the request (the stream may Start
  // another, though the service ends the stream).
  absl::StatusOr<Progress> Continue(std::vector<uint64_t>* confirmed,
                                    const std::shared_ptr<Table::Waker>& wake);

  // Start and Continue until done, blocking the calling thread while a table
  // refuses an item; before each wait, `flush` sends what is confirmed (a
  // false `flush` ends the request early with OK: the client went away).
  // `cancelled` (may be null) is polled while waiting and ends the wait with
  // CANCELLED. For callers with a thread to spare (tests, the fuzzer).
  absl::Status Handle(deepmind::reverb::InsertStreamRequest request,
                      std::vector<uint64_t>* confirmed, const Flush& flush,
                      const std::function<bool()>& cancelled = nullptr);

  // Chunks held for later items.
  size_t num_chunks() const { return chunks_.size(); }

 private:
  absl::StatusOr<TableItem> MakeItem(const deepmind::reverb::PrioritizedItem& item) const;
  absl::StatusOr<Progress> ContinueRequest(std::vector<uint64_t>* confirmed,
                                           const std::shared_ptr<Table::Waker>& wake);
  absl::Status KeepChunks();

  TableLookup tables_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const TableChunk>> chunks_;
  // The request being handled, borrowed from Start (null when none is),
  // and the index of its next item.
  const deepmind::reverb::InsertStreamRequest* request_ = nullptr;
  int next_item_ = 0;
  // The next item, built once and kept while its table refuses it.
  std::shared_ptr<Table> pending_table_;
  std::optional<TableItem> pending_;
};

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SERVICE_SERVER_INSERT_STREAM_H_
