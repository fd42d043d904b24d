// TrajectoryColumnSpecs and the column decoding over chunks: a trajectory
// from the wire is not trusted, so slices outside their chunk, negative
// lengths and squeezed columns of several rows are errors, never writes
// beyond the spec's bytes.
#include "server/trajectory_columns.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/chunk_view.h"
#include "server/tensor.h"
#include "server/testing/tensor_testing.h"

namespace tf_reverb {
namespace {

using deepmind::reverb::ChunkData;
using deepmind::reverb::FlatTrajectory;

// One chunk of key 7: an int32 column of 4 rows of 2 and a string column of
// 4 rows.
ChunkData FourRowChunk() {
  absl::StatusOr<ChunkData> chunk =
      BuildChunk(7,
                 {tensor_testing::Int32Tensor({4, 2}, {0, 1, 2, 3, 4, 5, 6, 7}),
                  tensor_testing::StringTensor({4}, {"a", "b", "c", "d"})},
                 1, 0, 0, false);
  EXPECT_TRUE(chunk.ok()) << chunk.status();
  return *chunk;
}

FlatTrajectory OneSlice(int index, int offset, int length, bool squeeze) {
  FlatTrajectory trajectory;
  auto* column = trajectory.add_columns();
  column->set_squeeze(squeeze);
  auto* slice = column->add_chunk_slices();
  slice->set_chunk_key(7);
  slice->set_index(index);
  slice->set_offset(offset);
  slice->set_length(length);
  return trajectory;
}

TEST(TrajectoryColumnsTest, SpecsAndRowsOfAValidSlice) {
  const ChunkData chunk = FourRowChunk();
  const ChunkView view = ChunkViewOf(chunk);
  auto find = [&view](uint64_t) -> absl::StatusOr<const ChunkView*> { return &view; };
  const FlatTrajectory trajectory = OneSlice(0, 1, 2, false);
  absl::StatusOr<std::vector<ColumnSpec>> specs = TrajectoryColumnSpecs(trajectory, find);
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_EQ((*specs)[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(ColumnBytes((*specs)[0]), 16);
  std::vector<int32_t> rows(4);
  ASSERT_TRUE(
      UnpackTrajectoryColumnInto(trajectory, 0, find, reinterpret_cast<char*>(rows.data())).ok());
  EXPECT_EQ(rows, (std::vector<int32_t>{2, 3, 4, 5}));
  std::vector<std::string> strings;
  ASSERT_TRUE(UnpackTrajectoryStrings(OneSlice(1, 2, 2, false), 0, find, &strings).ok());
  EXPECT_EQ(strings, (std::vector<std::string>{"c", "d"}));
}

TEST(TrajectoryColumnsTest, HostileSlicesAreErrors) {
  const ChunkData chunk = FourRowChunk();
  const ChunkView view = ChunkViewOf(chunk);
  auto find = [&view](uint64_t) -> absl::StatusOr<const ChunkView*> { return &view; };
  struct Case {
    const char* what;
    FlatTrajectory trajectory;
  };
  FlatTrajectory negative_then_positive = OneSlice(0, 0, 5, false);
  *negative_then_positive.mutable_columns(0)->add_chunk_slices() =
      negative_then_positive.columns(0).chunk_slices(0);
  negative_then_positive.mutable_columns(0)->mutable_chunk_slices(1)->set_length(-3);
  const std::vector<Case> cases = {
      {"a squeezed column of two rows", OneSlice(0, 0, 2, true)},
      {"a negative length", OneSlice(0, 0, -1, false)},
      {"a negative offset", OneSlice(0, -1, 2, false)},
      {"rows beyond the chunk", OneSlice(0, 3, 2, false)},
      {"lengths summing to a small count", negative_then_positive},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    absl::StatusOr<std::vector<ColumnSpec>> specs = TrajectoryColumnSpecs(c.trajectory, find);
    EXPECT_EQ(specs.status().code(), absl::StatusCode::kInvalidArgument);
  }
  std::vector<std::string> strings;
  EXPECT_EQ(UnpackTrajectoryStrings(OneSlice(1, 3, 2, false), 0, find, &strings).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UnpackTrajectoryStrings(OneSlice(1, -1, 1, false), 0, find, &strings).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(strings.empty());
}

}  // namespace
}  // namespace tf_reverb
