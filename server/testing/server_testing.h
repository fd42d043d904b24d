// Helpers of the C++ tests that run a Server on a real port: tables to serve,
// starting the server, addresses that do or do not allow the in-process
// shortcut, a raw ReverbService stub and InsertStream/SampleStream messages
// built by hand (chunks and items as the wire protocol carries them,
// docs/architecture/wire-protocol.md).
//
// Contract: test-only; failures are reported with gtest EXPECTs. Thread-safe.
#ifndef TF_REVERB_SERVER_TESTING_SERVER_TESTING_H_
#define TF_REVERB_SERVER_TESTING_SERVER_TESTING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/support/status.h"
#include "reverb_service.grpc.pb.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/rate_limiter.h"
#include "server/service/server.h"
#include "server/table.h"
#include "server/testing/table_testing.h"

namespace tf_reverb {
namespace testing {

// How long a check that a call stays blocked looks (a busy machine can only
// make it miss a bug, never fail a correct server).
inline constexpr absl::Duration kBlockCheck = absl::Milliseconds(200);
// Deadline of calls and waits that must succeed: only a hung test reaches
// it, however loaded the machine.
inline constexpr absl::Duration kUnblockTimeout = absl::Seconds(120);
inline constexpr absl::Duration kRpcDeadline = absl::Seconds(120);

// A table named `name` with `sampler`, a FIFO remover and room for 1000
// items.
std::shared_ptr<Table> ServedTable(std::string name,
                                   const KeyDistributionOptions& sampler = Uniform(),
                                   RateLimiter limiter = MinSize(1), int32_t max_times_sampled = 0);

// A server of `tables` on a port gRPC picks; null (and a failed EXPECT) if
// it does not start.
std::unique_ptr<Server> StartServer(std::vector<std::shared_ptr<Table>> tables);

// An address of the server on `port` that Client::LoopbackPort() does not
// recognise, so samplers must use gRPC.
std::string GrpcOnlyAddress(int port);
// An address of the server on `port` that samplers of this process read
// through the in-process shortcut.
std::string ShortcutAddress(int port);

// A stub on 127.0.0.1:`port` without message size limits.
std::unique_ptr<deepmind::reverb::ReverbService::Stub> RawStub(int port);

// A chunk of `rows` int32 rows [v, v+1] with v = key * 10 + row.
deepmind::reverb::ChunkData WireChunk(uint64_t key, int rows = 2, uint64_t episode = 1);

// An item of `table` whose single column is rows [offset, offset+length) of
// each chunk of `chunk_keys`, in order.
deepmind::reverb::PrioritizedItem WireItem(uint64_t key, const std::string& table, double priority,
                                           const std::vector<uint64_t>& chunk_keys, int offset = 0,
                                           int length = 2);

// What one InsertStream call ended with, and the keys it confirmed.
struct InsertResult {
  grpc::Status status;
  std::vector<uint64_t> confirmed;
};
// Runs one InsertStream that sends `requests`, then reads to the end.
InsertResult RunInsertStream(deepmind::reverb::ReverbService::Stub& stub,
                             const std::vector<deepmind::reverb::InsertStreamRequest>& requests);

// A SampleStream request for `n` items of `table`.
deepmind::reverb::SampleStreamRequest SampleRequest(const std::string& table, int64_t n,
                                                    int64_t timeout_ms = -1);

}  // namespace testing
}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_TESTING_SERVER_TESTING_H_
