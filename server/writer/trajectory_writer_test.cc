// TrajectoryWriter against real servers (server::Server) over real gRPC.
#include "server/writer/trajectory_writer.h"

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/channel.h"
#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/client/client.h"
#include "server/client/sample.h"
#include "server/client/sampler.h"
#include "server/error_kind.h"
#include "server/rate_limiter.h"
#include "server/service/server.h"
#include "server/signature.h"
#include "server/table.h"
#include "server/tensor.h"
#include "server/testing/server_testing.h"
#include "server/testing/table_testing.h"
#include "server/testing/tensor_testing.h"
#include "server/writer/cell_ref.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

using ::tf_reverb::tensor_testing::FloatScalar;
using ::tf_reverb::tensor_testing::Int32Row;
using ::tf_reverb::tensor_testing::Values;

namespace tfp = ::tf_reverb::tf;
using ::testing::HasSubstr;
using ::tf_reverb::testing::Fifo;
using ::tf_reverb::testing::Limiter;
using ::tf_reverb::testing::MinSize;
using ::tf_reverb::testing::ServedTable;
using ::tf_reverb::testing::StartServer;

// Deadline of calls and waits that must succeed: only a hung test reaches
// it, however loaded the machine.
constexpr absl::Duration kDeadline = absl::Seconds(120);

// Polls `done` until it holds or kDeadline passes; returns its last value.
template <typename Predicate>
bool Eventually(Predicate done) {
  const absl::Time deadline = absl::Now() + kDeadline;
  while (!done() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  return done();
}

// After the first insert, each insert needs a sample first.
RateLimiter OneInsertPerSample() { return Limiter(1.0, 1, -DBL_MAX, 1.0); }

// Stops `server` and starts one of `tables` on its port in its place (null,
// and a failed EXPECT, if that does not start).
void RestartServer(std::unique_ptr<Server>& server, std::vector<std::shared_ptr<Table>> tables) {
  const int port = server->port();
  server->Stop();
  server.reset();
  absl::StatusOr<std::unique_ptr<Server>> restarted = Server::Start(std::move(tables), port);
  EXPECT_TRUE(restarted.ok()) << restarted.status();
  if (restarted.ok()) server = *std::move(restarted);
}

std::shared_ptr<grpc::Channel> ChannelTo(int port) {
  return Client(absl::StrCat("127.0.0.1:", port)).channel();
}

std::unique_ptr<TrajectoryWriter> NewWriter(int port, int keep_alive = 4, int chunk_length = 2,
                                            int max_queued_items = 10000) {
  TrajectoryWriterOptions options;
  options.chunker_options = {keep_alive, chunk_length};
  options.max_queued_items = max_queued_items;
  return TrajectoryWriter::Create(ChannelTo(port), options).value();
}

// Appends step i = {obs: [i, 10 i], reward: i}; returns its refs.
TrajectoryWriter::StepRefs AppendStep(TrajectoryWriter& writer, int i) {
  TrajectoryWriter::StepRefs refs;
  absl::Status s =
      writer.Append({Int32Row({i, 10 * i}), FloatScalar(static_cast<float>(i))}, &refs);
  EXPECT_TRUE(s.ok()) << s;
  return refs;
}

std::weak_ptr<CellRef> Ref(const TrajectoryWriter::StepRefs& step, int column) {
  return *step[column];
}

TrajectoryColumn Column(std::vector<std::weak_ptr<CellRef>> refs, bool squeeze = false) {
  return TrajectoryColumn{std::move(refs), squeeze};
}

// Samples `n` items of a FIFO table through gRPC.
std::vector<Sample> SampleN(int port, const std::string& table, int n) {
  Client client(absl::StrCat("dns:///127.0.0.1:", port));
  SamplerOptions options;
  options.max_samples = n;
  options.rate_limiter_timeout = kDeadline;
  std::unique_ptr<Sampler> sampler = client.NewSampler(table, options);
  std::vector<Sample> out;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<Sample> sample = sampler->Next();
    EXPECT_TRUE(sample.ok()) << sample.status();
    if (!sample.ok()) break;
    out.push_back(*std::move(sample));
  }
  return out;
}

TEST(TrajectoryWriterTest, ItemsOverHistorySlicesArriveIntact) {
  auto server = StartServer({ServedTable("t", Fifo())});
  auto writer = NewWriter(server->port());
  std::vector<TrajectoryWriter::StepRefs> steps;
  for (int i = 0; i < 4; ++i) steps.push_back(AppendStep(*writer, i));
  // obs of steps 1..3 (spanning two chunks), reward of step 3 squeezed.
  ASSERT_TRUE(writer
                  ->CreateItem("t", 1.5,
                               {Column({Ref(steps[1], 0), Ref(steps[2], 0), Ref(steps[3], 0)}),
                                Column({Ref(steps[3], 1)}, /*squeeze=*/true)})
                  .ok());
  ASSERT_TRUE(writer->Flush().ok());
  EXPECT_EQ(writer->num_pending_items(), 0);
  std::vector<Sample> samples = SampleN(server->port(), "t", 1);
  ASSERT_EQ(samples.size(), 1u);
  const Sample& sample = samples[0];
  EXPECT_EQ(sample.meta().priority, 1.5);
  Tensor obs = sample.UnpackColumn(0).value();
  EXPECT_EQ(obs.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(Values<int32_t>(obs), (std::vector<int32_t>{1, 10, 2, 20, 3, 30}));
  Tensor reward = sample.UnpackColumn(1).value();
  EXPECT_TRUE(reward.shape.empty());
  EXPECT_EQ(Values<float>(reward), std::vector<float>{3.0f});
  EXPECT_FALSE(sample.squeezed(0));
  EXPECT_TRUE(sample.squeezed(1));
  // Samples arrive batched (decoded by the server); the stored trajectory is
  // what Lookup returns.
  Client client(absl::StrCat("dns:///127.0.0.1:", server->port()));
  absl::StatusOr<Client::LookupResult> stored = client.Lookup("t", {sample.meta().key}, kDeadline);
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->found.size(), 1u);
  const auto& columns = stored->found[0].trajectory().columns();
  ASSERT_EQ(columns.size(), 2);
  EXPECT_EQ(columns[0].chunk_slices_size(), 2);  // chunks [0,1] and [2,3]
  EXPECT_TRUE(columns[1].squeeze());
}

// Rows of 16 KiB: chunks of 2+ rows reach kAsyncEncodeMinBytes and are
// encoded on the writer's encoder thread.
Tensor LargeRow(int i) {
  std::vector<int32_t> values(4096);
  for (size_t j = 0; j < values.size(); ++j) values[j] = i * 100000 + static_cast<int>(j);
  return Int32Row(values);
}

TEST(TrajectoryWriterTest, LargeChunksEncodedInTheBackgroundArriveIntact) {
  // Every item is sampled once, in insertion order.
  auto server = StartServer({ServedTable("t", Fifo(), MinSize(1), /*max_times_sampled=*/1)});
  auto writer = NewWriter(server->port(), /*keep_alive=*/4, /*chunk_length=*/4);
  std::vector<TrajectoryWriter::StepRefs> steps;
  for (int i = 0; i < 12; ++i) {
    TrajectoryWriter::StepRefs refs;
    ASSERT_TRUE(writer->Append({LargeRow(i)}, &refs).ok());
    // Readable at once, whether buffered, being encoded or encoded.
    absl::StatusOr<Tensor> data = (*refs[0]).lock()->GetData();
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(Values<int32_t>(*data)[1], i * 100000 + 1);
    steps.push_back(std::move(refs));
    if (i >= 2) {
      ASSERT_TRUE(
          writer
              ->CreateItem("t", 1.0,
                           {Column({Ref(steps[i - 2], 0), Ref(steps[i - 1], 0), Ref(steps[i], 0)})})
              .ok());
    }
  }
  ASSERT_TRUE(writer->Flush().ok());
  std::vector<Sample> samples = SampleN(server->port(), "t", 10);
  ASSERT_EQ(samples.size(), 10u);
  for (int n = 0; n < 10; ++n) {
    Tensor column = samples[n].UnpackColumn(0).value();
    EXPECT_EQ(column.shape, (std::vector<int64_t>{3, 4096}));
    std::vector<int32_t> values = Values<int32_t>(column);
    for (int t = 0; t < 3; ++t) EXPECT_EQ(values[t * 4096 + 7], (n + t) * 100000 + 7);
  }
}

TEST(TrajectoryWriterTest, LargeChunksGoOutWhileTheirItemsWaitForOtherChunks) {
  auto server = StartServer({ServedTable("t", Fifo())});
  auto writer = NewWriter(server->port(), /*keep_alive=*/4, /*chunk_length=*/2);
  // Column 1 (scalars) is chunked 6 steps at a time, column 0 (16 KiB rows,
  // encoded in the background) 2 at a time.
  ASSERT_TRUE(writer->ConfigureChunker(1, {8, 6}).ok());
  auto append = [&](int i) {
    TrajectoryWriter::StepRefs refs;
    EXPECT_TRUE(writer->Append({LargeRow(i), FloatScalar(static_cast<float>(i))}, &refs).ok());
    return refs;
  };
  // Chunks no item references are not sent.
  append(0);
  append(1);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(writer->num_requests_sent(), 0);
  // An item over step 2 waits for the scalar chunk [0, 6); the frame chunk
  // [2, 4) it references goes out as soon as step 3 completes it.
  TrajectoryWriter::StepRefs step2 = append(2);
  ASSERT_TRUE(
      writer->CreateItem("t", 1.0, {Column({Ref(step2, 0)}), Column({Ref(step2, 1)})}).ok());
  append(3);
  EXPECT_TRUE(Eventually([&] { return writer->num_requests_sent() > 0; }));
  EXPECT_EQ(writer->num_requests_sent(), 1);
  EXPECT_EQ(writer->num_pending_items(), 1);
  EXPECT_EQ(server->service()->GetTable("t").value()->size(), 0);
  ASSERT_TRUE(writer->Flush().ok());
  std::vector<Sample> samples = SampleN(server->port(), "t", 1);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(Values<int32_t>(samples[0].UnpackColumn(0).value())[7], 2 * 100000 + 7);
  EXPECT_EQ(Values<float>(samples[0].UnpackColumn(1).value()), std::vector<float>{2.0f});
}

TEST(TrajectoryWriterTest, LaterItemsReuseChunksSentEarlierOnTheStream) {
  auto server = StartServer({ServedTable("t", Fifo()), ServedTable("u", Fifo())});
  auto writer = NewWriter(server->port(), /*keep_alive=*/6, /*chunk_length=*/2);
  std::vector<TrajectoryWriter::StepRefs> steps;
  for (int i = 0; i < 2; ++i) steps.push_back(AppendStep(*writer, i));
  ASSERT_TRUE(writer->CreateItem("t", 1, {Column({Ref(steps[0], 0), Ref(steps[1], 0)})}).ok());
  ASSERT_TRUE(writer->Flush().ok());
  for (int i = 2; i < 4; ++i) steps.push_back(AppendStep(*writer, i));
  // Needs chunk [0,1] again: the server must still hold it (keep_chunk_keys).
  ASSERT_TRUE(writer
                  ->CreateItem("u", 2,
                               {Column({Ref(steps[0], 0), Ref(steps[1], 0), Ref(steps[2], 0),
                                        Ref(steps[3], 0)})})
                  .ok());
  ASSERT_TRUE(writer->Flush().ok());
  EXPECT_EQ(writer->num_streams_opened(), 1);
  std::vector<Sample> samples = SampleN(server->port(), "u", 1);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(Values<int32_t>(samples[0].UnpackColumn(0).value()),
            (std::vector<int32_t>{0, 0, 1, 10, 2, 20, 3, 30}));
}

TEST(TrajectoryWriterTest, ItemsWaitForTheirChunksUnlessFlushed) {
  auto server = StartServer({ServedTable("t", Fifo())});
  auto writer = NewWriter(server->port(), 4, 4);
  auto step = AppendStep(*writer, 0);
  ASSERT_TRUE(writer->CreateItem("t", 1, {Column({Ref(step, 1)})}).ok());
  // The chunk is open, so nothing can be sent yet: a zero-timeout flush of
  // all but one item returns at once, and the item stays queued.
  ASSERT_TRUE(writer->Flush(/*block_until_num_items=*/1).ok());
  EXPECT_EQ(writer->num_pending_items(), 1);
  EXPECT_FALSE(Ref(step, 1).lock()->IsReady());
  ASSERT_TRUE(writer->Flush().ok());
  EXPECT_TRUE(Ref(step, 1).lock()->IsReady());
  EXPECT_EQ(server->service()->GetTable("t").value()->size(), 1);
}

TEST(TrajectoryWriterTest, ReadyItemsAreSentWithoutFlushInSharedRequests) {
  auto server = StartServer({ServedTable("t", Fifo())});
  auto writer = NewWriter(server->port(), /*keep_alive=*/1, /*chunk_length=*/1);
  constexpr int kItems = 200;
  const absl::Time start = absl::Now();
  for (int i = 0; i < kItems; ++i) {
    auto step = AppendStep(*writer, i);
    ASSERT_TRUE(writer->CreateItem("t", 1, {Column({Ref(step, 1)})}).ok());
    // An actor's pace: slower than a send, so that without coalescing
    // every item would go out on its own.
    absl::SleepFor(absl::Microseconds(200));
  }
  const absl::Duration pace = (absl::Now() - start) / kItems;
  // No Flush: the coalescing window ends by itself.
  EXPECT_TRUE(Eventually([&] { return writer->num_pending_items() == 0; }));
  EXPECT_EQ(server->service()->GetTable("t").value()->size(), kItems);
  // A steady stream of items shares requests: items that come within the
  // coalescing window of each other. On a machine so busy that the loop
  // above took longer per item than the window, there was no such stream,
  // and sharing is not expected (seen: 0.3-0.5 ms per item, 40-60 requests;
  // 1.3-1.8 ms under load, 55-77 requests).
  if (pace <= kCoalesceWindow) {
    EXPECT_LE(writer->num_requests_sent(), kItems / 2) << "pace " << pace;
  } else {
    std::cerr << "Not checking request sharing: one item per " << pace
              << ", slower than the coalescing window allows\n";
  }
}

TEST(TrajectoryWriterTest, CreateItemValidation) {
  auto server = StartServer({ServedTable("t", Fifo())});
  auto writer = NewWriter(server->port(), /*keep_alive=*/1, /*chunk_length=*/1);
  auto first = AppendStep(*writer, 0);
  auto second = AppendStep(*writer, 1);
  EXPECT_TRUE(Ref(first, 0).expired());
  absl::Status expired =
      writer->CreateItem("t", 1, {Column({Ref(second, 1)}), Column({Ref(first, 0)})});
  EXPECT_EQ(expired.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(expired.message(), HasSubstr("Error in column 1"));
  EXPECT_THAT(expired.message(), HasSubstr("expired"));
  EXPECT_EQ(writer->CreateItem("t", 1, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(writer->CreateItem("t", NAN, {Column({Ref(second, 0)})}).message(), HasSubstr("NaN"));
  EXPECT_THAT(
      writer->CreateItem("t", 1, {Column({Ref(second, 0), Ref(second, 0)}, true)}).message(),
      HasSubstr("exactly one row"));
  EXPECT_THAT(writer->CreateItem("t", 1, {Column({Ref(second, 0), Ref(second, 1)})}).message(),
              HasSubstr("different specs"));
  EXPECT_EQ(writer->num_pending_items(), 0);
}

TEST(TrajectoryWriterTest, SignatureValidation) {
  auto server = StartServer({ServedTable("t", Fifo()), ServedTable("free", Fifo())});
  TrajectoryWriterOptions options;
  options.chunker_options = {2, 1};
  TableSignatures signatures;
  signatures["t"] =
      std::vector<SignatureSpec>{{"(0,)", "", tfp::DT_INT32, std::vector<int64_t>{-1, 2}},
                                 {"(1,)", "", tfp::DT_FLOAT, std::vector<int64_t>{}}};
  signatures["free"] = std::nullopt;
  options.signatures = signatures;
  auto writer = TrajectoryWriter::Create(ChannelTo(server->port()), options).value();
  auto a = AppendStep(*writer, 0);
  auto b = AppendStep(*writer, 1);
  EXPECT_TRUE(
      writer->CreateItem("t", 1, {Column({Ref(a, 0), Ref(b, 0)}), Column({Ref(b, 1)}, true)}).ok());
  absl::Status unknown = writer->CreateItem("nope", 1, {Column({Ref(b, 1)})});
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.message(), HasSubstr("could not be found"));
  EXPECT_THAT(unknown.message(), HasSubstr("free, t"));
  absl::Status count = writer->CreateItem("t", 1, {Column({Ref(b, 0)})});
  EXPECT_THAT(count.message(), HasSubstr("1 columns but the signature has 2"));
  // Unsqueezed reward has shape [1], the signature says [].
  absl::Status shape = writer->CreateItem("t", 1, {Column({Ref(b, 0)}), Column({Ref(b, 1)})});
  EXPECT_THAT(shape.message(), HasSubstr("column 1 as float[] but the item provides float[1]"));
  absl::Status dtype = writer->CreateItem("t", 1, {Column({Ref(b, 1)}), Column({Ref(b, 1)}, true)});
  EXPECT_THAT(dtype.message(), HasSubstr("column 0 as int32[?,2]"));
  EXPECT_TRUE(writer->CreateItem("free", 1, {Column({Ref(b, 1)})}).ok());
  ASSERT_TRUE(writer->Flush().ok());
}

TEST(TrajectoryWriterTest, UnknownTableWithoutValidationIsSticky) {
  auto server = StartServer({ServedTable("t", Fifo())});
  auto writer = NewWriter(server->port(), 1, 1);
  auto step = AppendStep(*writer, 0);
  ASSERT_TRUE(writer->CreateItem("missing", 1, {Column({Ref(step, 0)})}).ok());
  absl::Status flushed = writer->Flush();
  EXPECT_EQ(flushed.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(flushed.message(), HasSubstr("Priority table missing was not found"));
  TrajectoryWriter::StepRefs refs;
  EXPECT_EQ(writer->Append({FloatScalar(1)}, &refs).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(writer->Flush().code(), absl::StatusCode::kNotFound);
}

TEST(TrajectoryWriterTest, AppendChecksEveryColumnBeforeBuffering) {
  auto server = StartServer({ServedTable("t", Fifo())});
  auto writer = NewWriter(server->port());
  AppendStep(*writer, 0);
  TrajectoryWriter::StepRefs refs;
  absl::Status bad = writer->Append({Int32Row({1, 2}), Int32Row({1})}, &refs);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("column 1"));
  EXPECT_EQ(writer->episode_steps(), 1);
  // Column 0 was not buffered by the failed call: step 1 may still set it.
  EXPECT_TRUE(writer->Append({Int32Row({1, 2}), std::nullopt}, &refs).ok());
  EXPECT_FALSE(refs[1].has_value());
  EXPECT_EQ(writer->episode_steps(), 2);
}

TEST(TrajectoryWriterTest, PartialSteps) {
  auto server = StartServer({ServedTable("t", Fifo())});
  auto writer = NewWriter(server->port());
  TrajectoryWriter::StepRefs refs;
  ASSERT_TRUE(writer->AppendPartial({Int32Row({1, 2}), std::nullopt}, &refs).ok());
  EXPECT_EQ(writer->episode_steps(), 0);
  absl::Status twice = writer->AppendPartial({Int32Row({3, 4})}, &refs);
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(twice.message(), HasSubstr("already been set in the active step"));
  ASSERT_TRUE(writer->Append({std::nullopt, FloatScalar(2)}, &refs).ok());
  EXPECT_EQ(writer->episode_steps(), 1);
  EXPECT_EQ(refs[1]->lock()->episode_step(), 0);
  ASSERT_TRUE(writer->Append({Int32Row({5, 6})}, &refs).ok());
  EXPECT_EQ(refs[0]->lock()->episode_step(), 1);
}

TEST(TrajectoryWriterTest, EndEpisode) {
  auto server = StartServer({ServedTable("t", Fifo())});
  auto writer = NewWriter(server->port(), 4, 4);
  auto a = AppendStep(*writer, 0);
  const uint64_t first_episode = Ref(a, 0).lock()->episode_id();
  ASSERT_TRUE(writer->CreateItem("t", 1, {Column({Ref(a, 0)})}).ok());
  ASSERT_TRUE(writer->EndEpisode(/*clear_buffers=*/false).ok());
  EXPECT_EQ(writer->num_pending_items(), 0);
  EXPECT_EQ(writer->episode_steps(), 0);
  EXPECT_FALSE(Ref(a, 1).expired());  // kept, and its chunk finalized
  EXPECT_TRUE(Ref(a, 1).lock()->IsReady());
  auto b = AppendStep(*writer, 1);
  EXPECT_NE(Ref(b, 0).lock()->episode_id(), first_episode);
  EXPECT_EQ(Ref(b, 0).lock()->episode_step(), 0);
  ASSERT_TRUE(writer->EndEpisode(/*clear_buffers=*/true).ok());
  EXPECT_TRUE(Ref(b, 0).expired());
  EXPECT_TRUE(Ref(a, 1).expired());
}

TEST(TrajectoryWriterTest, FlushAndEndEpisodeTimeOutWhileTheTableBlocks) {
  auto table = ServedTable("t", Fifo(), OneInsertPerSample());
  auto server = StartServer({table});
  auto writer = NewWriter(server->port(), 1, 1);
  for (int i = 0; i < 2; ++i) {
    auto step = AppendStep(*writer, i);
    ASSERT_TRUE(writer->CreateItem("t", 1, {Column({Ref(step, 0)})}).ok());
  }
  absl::Status flushed = writer->Flush(0, absl::Milliseconds(200));
  EXPECT_EQ(flushed.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(flushed.message(), HasSubstr("Flush call did not complete within provided timeout"));
  EXPECT_EQ(ErrorKindOf(flushed), ErrorKind::kCallerTimeout);
  absl::Status ended = writer->EndEpisode(true, absl::ZeroDuration());
  EXPECT_EQ(ended.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(ended.message(), HasSubstr("End episode call did not complete"));
  EXPECT_EQ(ErrorKindOf(ended), ErrorKind::kCallerTimeout);
  EXPECT_EQ(writer->episode_steps(), 2);                  // nothing reset on timeout
  EXPECT_EQ(SampleN(server->port(), "t", 1).size(), 1u);  // unblocks the insert
  ASSERT_TRUE(writer->Flush(0, kDeadline).ok());
  EXPECT_EQ(table->size(), 2);
}

TEST(TrajectoryWriterTest, CreateItemBlocksWhenTooManyItemsArePending) {
  auto table = ServedTable("t", Fifo(), OneInsertPerSample());
  auto server = StartServer({table});
  auto writer = NewWriter(server->port(), 1, 1, /*max_queued_items=*/2);
  std::vector<std::weak_ptr<CellRef>> refs;
  for (int i = 0; i < 3; ++i) {
    auto step = AppendStep(*writer, i);
    ASSERT_TRUE(writer->CreateItem("t", 1, {Column({Ref(step, 0)})}).ok());
    if (i == 0) ASSERT_TRUE(writer->Flush().ok());
  }
  EXPECT_EQ(writer->num_pending_items(), 2);
  auto step = AppendStep(*writer, 3);
  absl::Notification created;
  std::thread creator([&] {
    EXPECT_TRUE(writer->CreateItem("t", 1, {Column({Ref(step, 0)})}).ok());
    created.Notify();
  });
  EXPECT_FALSE(created.WaitForNotificationWithTimeout(absl::Milliseconds(300)));
  EXPECT_LE(writer->num_pending_items(), 2);
  SampleN(server->port(), "t", 1);  // room for one more insert
  EXPECT_TRUE(created.WaitForNotificationWithTimeout(kDeadline));
  creator.join();
  SampleN(server->port(), "t", 2);
  ASSERT_TRUE(writer->Flush(0, kDeadline).ok());
  EXPECT_EQ(table->size(), 4);
}

TEST(TrajectoryWriterTest, ReconnectsAfterServerRestartWithoutDuplicates) {
  auto server = StartServer({ServedTable("t", Fifo())});
  const int port = server->port();
  auto writer = NewWriter(port, 1, 1);
  for (int i = 0; i < 3; ++i) {
    auto step = AppendStep(*writer, i);
    ASSERT_TRUE(writer->CreateItem("t", 1, {Column({Ref(step, 0)})}).ok());
  }
  ASSERT_TRUE(writer->Flush().ok());
  auto table = ServedTable("t", Fifo());
  RestartServer(server, {table});
  ASSERT_NE(server, nullptr);
  for (int i = 3; i < 5; ++i) {
    auto step = AppendStep(*writer, i);
    ASSERT_TRUE(writer->CreateItem("t", 1, {Column({Ref(step, 0)})}).ok());
  }
  ASSERT_TRUE(writer->Flush(0, kDeadline).ok());
  EXPECT_EQ(table->size(), 2);  // confirmed items were not resent
  EXPECT_GE(writer->num_streams_opened(), 2);
}

TEST(TrajectoryWriterTest, ResendsUnconfirmedItemsAfterServerRestart) {
  auto server = StartServer({ServedTable("t", Fifo(), OneInsertPerSample())});
  const int port = server->port();
  auto writer = NewWriter(port, 1, 1);
  for (int i = 0; i < 2; ++i) {
    auto step = AppendStep(*writer, i);
    ASSERT_TRUE(writer->CreateItem("t", 1, {Column({Ref(step, 0)})}).ok());
  }
  // The second insert blocks in the rate limiter and stays unconfirmed.
  EXPECT_EQ(writer->Flush(1, kDeadline).code(), absl::StatusCode::kOk);
  EXPECT_EQ(writer->Flush(0, absl::Milliseconds(100)).code(), absl::StatusCode::kDeadlineExceeded);
  auto table = ServedTable("t", Fifo());
  RestartServer(server, {table});
  ASSERT_NE(server, nullptr);
  ASSERT_TRUE(writer->Flush(0, kDeadline).ok());
  EXPECT_EQ(table->size(), 1);
  std::vector<Sample> samples = SampleN(port, "t", 1);
  ASSERT_EQ(samples.size(), 1u);
  EXPECT_EQ(Values<int32_t>(samples[0].UnpackColumn(0).value()), (std::vector<int32_t>{1, 10}));
}

TEST(TrajectoryWriterTest, ConfigureChunker) {
  auto server = StartServer({ServedTable("t", Fifo())});
  auto writer = NewWriter(server->port(), 2, 2);
  ASSERT_TRUE(writer->ConfigureChunker(1, {5, 5}).ok());
  EXPECT_EQ(writer->max_num_keep_alive_refs(), 5);
  EXPECT_EQ(writer->ConfigureChunker(0, {1, 2}).code(), absl::StatusCode::kInvalidArgument);
  auto step = AppendStep(*writer, 0);
  EXPECT_EQ(writer->ConfigureChunker(1, {3, 3}).code(), absl::StatusCode::kFailedPrecondition);
  for (int i = 1; i < 5; ++i) AppendStep(*writer, i);
  EXPECT_TRUE(Ref(step, 1).lock()->IsReady());  // chunk of 5 rows complete
  EXPECT_EQ(Ref(step, 1).lock()->GetChunk()->data().tensors(0).tensor_shape().dim(0).size(), 5);
}

TEST(TrajectoryWriterTest, CloseStopsEverything) {
  auto server = StartServer({ServedTable("t", Fifo())});
  auto writer = NewWriter(server->port());
  auto step = AppendStep(*writer, 0);
  writer->Close();
  writer->Close();
  TrajectoryWriter::StepRefs refs;
  absl::Status s = writer->Append({FloatScalar(1)}, &refs);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "TrajectoryWriter::Close has been called.");
  EXPECT_EQ(writer->Flush().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TrajectoryWriterTest, CloseUnblocksAWriterWaitingForAnAbsentServer) {
  auto server = StartServer({ServedTable("t", Fifo())});
  const int port = server->port();
  server->Stop();
  server.reset();
  auto writer = NewWriter(port, 1, 1);
  auto step = AppendStep(*writer, 0);
  ASSERT_TRUE(writer->CreateItem("t", 1, {Column({Ref(step, 0)})}).ok());
  EXPECT_EQ(writer->Flush(0, absl::Milliseconds(100)).code(), absl::StatusCode::kDeadlineExceeded);
  writer->Close();  // returns although the stream never connected
  EXPECT_EQ(writer->num_pending_items(), 1);
}

}  // namespace
}  // namespace tf_reverb
