// zstd chunk negotiation end to end (chunk_codec.h): our server announces
// zstd on InsertStream, our TrajectoryWriter then stores structured chunks as
// zstd; servers that do not announce (Reverb's; ours with the announcement
// off) only ever receive Snappy, also for zstd chunks resent after a
// reconnect; clients that do not announce (Reverb's) sample Snappy only;
// checkpoints store zstd chunks as Snappy (dm-reverb restores them) and
// the restored data reads back intact.
#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "reverb_service.grpc.pb.h"
#include "reverb_service.pb.h"
#include "schema.pb.h"
#include "server/checkpointing/checkpointer.h"
#include "server/chunk_codec.h"
#include "server/chunk_view.h"
#include "server/client/client.h"
#include "server/client/sample.h"
#include "server/client/sampler.h"
#include "server/service/reverb_service.h"
#include "server/service/server.h"
#include "server/table.h"
#include "server/table_chunk.h"
#include "server/table_item.h"
#include "server/tensor.h"
#include "server/testing/server_testing.h"
#include "server/testing/table_testing.h"
#include "server/testing/tensor_testing.h"
#include "server/writer/trajectory_writer.h"

namespace tf_reverb {
namespace {

namespace tfp = ::tf_reverb::tf;
using ::tf_reverb::tensor_testing::Int32Scalar;
using ::tf_reverb::testing::Fifo;
using ::tf_reverb::testing::Limiter;
using ::tf_reverb::testing::SampleRequest;
using ::tf_reverb::testing::Uniform;

// Deadline of calls that must succeed: only a hung test reaches it, however
// loaded the machine.
constexpr absl::Duration kDeadline = absl::Seconds(120);
constexpr int kSteps = 20;
constexpr int kChunkLength = 5;

// Uniform sampling (a FIFO sampler would return item 0 every time).
std::shared_ptr<Table> MakeTable(double max_diff = DBL_MAX) {
  return ::tf_reverb::testing::MakeTable(Uniform(), Fifo(), 1000, 0,
                                         Limiter(1.0, 1, -DBL_MAX, max_diff));
}

// An Atari-like frame (compressible, so CodecPolicy::kAuto picks zstd) that
// differs per step.
Tensor Frame(int step) {
  Tensor t;
  t.dtype = tfp::DT_UINT8;
  t.shape = {84, 84};
  t.data.resize(84 * 84);
  for (int i = 0; i < 84 * 84; ++i) t.data[i] = static_cast<char>(i / 84 + step);
  return t;
}

std::unique_ptr<TrajectoryWriter> NewWriter(int port) {
  TrajectoryWriterOptions options;
  options.chunker_options.num_keep_alive_refs = kChunkLength;
  options.chunker_options.max_chunk_length = kChunkLength;
  return TrajectoryWriter::Create(Client(absl::StrCat("127.0.0.1:", port)).channel(), options)
      .value();
}

// Writes kSteps steps {frame, action}, one item per step over that step.
// Item 0 is flushed on its own: once it is confirmed the writer has read the
// server's announcement (it precedes every response), so the chunks of steps
// 1.. are made with the negotiated codec (step 0's chunk is Snappy).
void WriteSteps(TrajectoryWriter& writer, bool flush = true) {
  for (int i = 0; i < kSteps; ++i) {
    TrajectoryWriter::StepRefs refs;
    ASSERT_TRUE(writer.Append({Frame(i), Int32Scalar(i)}, &refs).ok());
    ASSERT_TRUE(
        writer
            .CreateItem("t", 1.0,
                        {TrajectoryColumn{{*refs[0]}, true}, TrajectoryColumn{{*refs[1]}, true}})
            .ok());
    if (i == 0) {
      absl::Status s = writer.Flush(0, kDeadline);
      ASSERT_TRUE(s.ok()) << s;
    }
  }
  if (flush) {
    absl::Status s = writer.Flush(0, kDeadline);
    ASSERT_TRUE(s.ok()) << s;
  }
}

// Compression of every chunk stored in `table` (without sampling it).
std::vector<ChunkCompression> StoredCompressions(Table& table) {
  std::vector<ChunkCompression> out;
  for (const Table::CheckpointItem& item : table.TakeSnapshot().items) {
    for (const auto& chunk : item.data->chunks) out.push_back(chunk->compression());
  }
  return out;
}

int Count(const std::vector<ChunkCompression>& v, ChunkCompression c) {
  return static_cast<int>(std::count(v.begin(), v.end(), c));
}

// Checks that `sample` holds the frame of the step its action names;
// returns that step (-1 on failure).
int ExpectConsistentStep(const Sample& sample) {
  absl::StatusOr<Tensor> frame = sample.UnpackColumn(0);
  absl::StatusOr<Tensor> action = sample.UnpackColumn(1);
  EXPECT_TRUE(frame.ok()) << frame.status();
  EXPECT_TRUE(action.ok()) << action.status();
  if (!frame.ok() || !action.ok() || action->data.size() != 4) return -1;
  int32_t step;
  std::memcpy(&step, action->data.data(), 4);
  EXPECT_TRUE(frame->data == Frame(step).data) << "frame of step " << step << " differs";
  return step;
}

// Samples 3 * kSteps items with our client (which announces zstd); returns
// how many were of steps >= 1 (whose frames are zstd on announcing servers).
int ExpectOurClientReads(int port) {
  Client client(absl::StrCat("ipv4:127.0.0.1:", port));
  SamplerOptions options;
  options.max_samples = 3 * kSteps;
  options.rate_limiter_timeout = kDeadline;
  std::unique_ptr<Sampler> sampler = client.NewSampler("t", options);
  int later_steps = 0;
  for (int i = 0; i < 3 * kSteps; ++i) {
    absl::StatusOr<Sample> sample = sampler->Next();
    EXPECT_TRUE(sample.ok()) << sample.status();
    if (!sample.ok()) break;
    later_steps += ExpectConsistentStep(*sample) >= 1;
  }
  EXPECT_GT(later_steps, 0);
  return later_steps;
}

// Samples like a Reverb client: a raw SampleStream without the codec
// metadata. Returns the compressions of the chunks received.
std::vector<ChunkCompression> SampleWithoutAnnouncement(int port, int n) {
  auto stub =
      deepmind::reverb::ReverbService::NewStub(Client(absl::StrCat("127.0.0.1:", port)).channel());
  grpc::ClientContext context;
  auto stream = stub->SampleStream(&context);
  EXPECT_TRUE(stream->Write(SampleRequest("t", n, /*timeout_ms=*/10000)));
  std::vector<ChunkCompression> seen;
  deepmind::reverb::SampleStreamResponse response;
  deepmind::reverb::SampleInfo info;
  std::vector<std::shared_ptr<const ChunkData>> chunks;
  int received = 0;
  while (received < n && stream->Read(&response)) {
    for (auto& entry : *response.mutable_entries()) {
      if (entry.has_info()) info = entry.info();
      for (auto& chunk : *entry.mutable_data()) {
        seen.push_back(chunk.compression());
        chunks.push_back(std::make_shared<const ChunkData>(std::move(chunk)));
      }
      if (entry.end_of_sequence()) {
        // Decodes as Snappy, i.e. as Reverb would.
        for (const auto& chunk : chunks) {
          for (const auto& tensor : chunk->data().tensors()) {
            EXPECT_TRUE(DecompressTensor(tensor, chunk->delta_encoded(), kSnappy).ok());
          }
        }
        ExpectConsistentStep(Sample(info, std::move(chunks)));
        chunks.clear();
        ++received;
      }
    }
  }
  EXPECT_EQ(received, n);
  context.TryCancel();
  stream->Finish();
  return seen;
}

class CodecNegotiationTest : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv("TF_REVERB_ZSTD"); }
  void TearDown() override { unsetenv("TF_REVERB_ZSTD"); }
};

TEST_F(CodecNegotiationTest, AnnouncingServerStoresZstdAndServesBothKindsOfClient) {
  auto table = MakeTable();
  auto server = Server::Start({table}, 0).value();
  ASSERT_TRUE(server->service()->announce_zstd());
  auto writer = NewWriter(server->port());
  WriteSteps(*writer);
  std::vector<ChunkCompression> stored = StoredCompressions(*table);
  ASSERT_EQ(stored.size(), 2u * kSteps);  // frame chunk + action chunk per item
  // Frames of steps 1.. (and of step 0 if the announcement came first) are
  // zstd; the tiny action chunks stay Snappy (kAuto).
  for (size_t i = 2; i < stored.size(); i += 2) EXPECT_EQ(stored[i], kZstd);
  for (size_t i = 1; i < stored.size(); i += 2) EXPECT_EQ(stored[i], kSnappy);
  SCOPED_TRACE("Reverb-like client");
  std::vector<ChunkCompression> received = SampleWithoutAnnouncement(server->port(), kSteps);
  EXPECT_EQ(Count(received, kZstd), 0);
  // The table still holds the zstd chunks (transcoding made copies).
  EXPECT_EQ(StoredCompressions(*table), stored);
}

TEST_F(CodecNegotiationTest, OurClientReceivesZstdAsStored) {
  auto table = MakeTable();
  auto server = Server::Start({table}, 0).value();
  auto writer = NewWriter(server->port());
  WriteSteps(*writer);
  ExpectOurClientReads(server->port());
}

TEST_F(CodecNegotiationTest, ServerWithoutAnnouncementGetsSnappyOnly) {
  auto table = MakeTable();
  auto server = Server::Start({table}, 0).value();
  server->service()->set_announce_zstd(false);
  auto writer = NewWriter(server->port());
  WriteSteps(*writer);
  std::vector<ChunkCompression> stored = StoredCompressions(*table);
  ASSERT_EQ(stored.size(), 2u * kSteps);
  EXPECT_EQ(Count(stored, kSnappy), 2 * kSteps);
  ExpectOurClientReads(server->port());
}

TEST_F(CodecNegotiationTest, EnvironmentDisablesZstd) {
  setenv("TF_REVERB_ZSTD", "0", 1);
  auto table = MakeTable();
  auto server = Server::Start({table}, 0).value();
  EXPECT_FALSE(server->service()->announce_zstd());
  server->service()->set_announce_zstd(true);  // the writer still refuses
  auto writer = NewWriter(server->port());
  WriteSteps(*writer);
  EXPECT_EQ(Count(StoredCompressions(*table), kSnappy), 2 * kSteps);
}

TEST_F(CodecNegotiationTest, AlwaysMakesEveryChunkZstd) {
  setenv("TF_REVERB_ZSTD", "always", 1);
  auto table = MakeTable();
  auto server = Server::Start({table}, 0).value();
  auto writer = NewWriter(server->port());
  WriteSteps(*writer);
  // Every chunk after the announcement (actions included) is zstd; the first
  // item's are too if the announcement arrived before its step was appended.
  std::vector<ChunkCompression> stored = StoredCompressions(*table);
  ASSERT_EQ(stored.size(), 2u * kSteps);
  EXPECT_GE(Count(stored, kZstd), 2 * (kSteps - 1));
  ExpectOurClientReads(server->port());
}

// Zstd chunks made for a server that announced zstd and not yet confirmed
// are resent as Snappy when the writer reconnects to one that does not.
TEST_F(CodecNegotiationTest, ReconnectToServerWithoutAnnouncementTranscodes) {
  // Only the first insert passes until something samples: the other items
  // (and their zstd chunks) stay unconfirmed.
  auto blocking = MakeTable(/*max_diff=*/1.0);
  auto first = Server::Start({blocking}, 0).value();
  const int port = first->port();
  auto writer = NewWriter(port);
  WriteSteps(*writer, /*flush=*/false);
  // Finalizes and sends the chunks; item 1 blocks in the rate limiter.
  absl::Status blocked = writer->Flush(0, absl::Milliseconds(200));
  EXPECT_EQ(blocked.code(), absl::StatusCode::kDeadlineExceeded) << blocked;
  EXPECT_EQ(writer->num_pending_items(), kSteps - 1);
  EXPECT_EQ(Count(StoredCompressions(*blocking), kSnappy), 2);  // item 0
  first->Stop();
  first.reset();

  // The replacement never announces zstd (set before it serves).
  auto table = MakeTable();
  auto service =
      std::make_unique<ReverbServiceImpl>(std::vector<std::shared_ptr<Table>>{table}, nullptr);
  service->set_announce_zstd(false);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials());
  builder.RegisterService(service.get());
  std::unique_ptr<grpc::Server> second = builder.BuildAndStart();
  ASSERT_NE(second, nullptr);
  absl::Status s = writer->Flush(0, kDeadline);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_GE(writer->num_streams_opened(), 2);
  std::vector<ChunkCompression> stored = StoredCompressions(*table);
  EXPECT_EQ(Count(stored, kZstd), 0);
  // Items 1.. were resent; the data is intact.
  EXPECT_EQ(table->size(), kSteps - 1);
  ExpectOurClientReads(port);
  writer.reset();
  service->Close();
  second->Shutdown();
}

TEST_F(CodecNegotiationTest, CheckpointsStoreZstdChunksAsSnappyAndRestoreIntact) {
  const std::string root = absl::StrCat(::testing::TempDir(), "/codec_ckpt");
  auto table = MakeTable();
  auto checkpointer = std::make_shared<Checkpointer>(root, CheckpointerOptions{});
  auto server = Server::Start({table}, 0, checkpointer).value();
  auto writer = NewWriter(server->port());
  WriteSteps(*writer);
  const std::vector<ChunkCompression> stored = StoredCompressions(*table);
  ASSERT_GT(Count(stored, kZstd), 0);
  ASSERT_TRUE(checkpointer->Save({table}).ok());
  writer.reset();
  server->Stop();

  auto restored = MakeTable();
  auto again =
      Server::Start({restored}, 0, std::make_shared<Checkpointer>(root, CheckpointerOptions{}))
          .value();
  const std::vector<ChunkCompression> restored_codecs = StoredCompressions(*restored);
  EXPECT_EQ(restored_codecs.size(), stored.size());
  EXPECT_EQ(Count(restored_codecs, kSnappy), static_cast<int>(stored.size()));
  ExpectOurClientReads(again->port());
}

}  // namespace
}  // namespace tf_reverb
