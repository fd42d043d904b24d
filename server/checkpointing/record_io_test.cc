#include "absl/status/status.h"
#include "server/checkpointing/record_io.h"

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ios>
#include <iterator>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/checkpointing/crc32c.h"

namespace tf_reverb {
namespace {

using ::testing::HasSubstr;

std::string TempFile(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / name).string();
}

TEST(Crc32cTest, MatchesTheStandardCheckValue) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
  // Incremental computation equals the one-shot one.
  EXPECT_EQ(Crc32c("6789", 4, Crc32c("12345", 5)), 0xE3069283u);
}

TEST(RecordIoTest, RoundTripsRecordsOfAnySize) {
  const std::string path = TempFile("round_trip.tfrecord");
  auto writer = RecordWriter::Create(path);
  ASSERT_TRUE(writer.ok()) << writer.status();
  const std::string big(3 << 20, 'x');
  for (const std::string& record : {std::string(), std::string("abc"), big}) {
    ASSERT_TRUE((*writer)->Write(record).ok());
  }
  ASSERT_TRUE((*writer)->Close().ok());
  auto reader = RecordReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::string record;
  ASSERT_TRUE((*reader)->Read(&record).ok());
  EXPECT_EQ(record, "");
  ASSERT_TRUE((*reader)->Read(&record).ok());
  EXPECT_EQ(record, "abc");
  ASSERT_TRUE((*reader)->Read(&record).ok());
  EXPECT_EQ(record, big);
  EXPECT_TRUE(absl::IsOutOfRange((*reader)->Read(&record)));
}

TEST(RecordIoTest, TheFramingIsTfRecords) {
  const std::string path = TempFile("framing.tfrecord");
  auto writer = RecordWriter::Create(path);
  ASSERT_TRUE((*writer)->Write("hi").ok());
  ASSERT_TRUE((*writer)->Close().ok());
  std::ifstream file(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.size(), 8u + 4u + 2u + 4u);
  EXPECT_EQ(bytes[0], 2);  // little-endian length
  EXPECT_EQ(bytes.substr(12, 2), "hi");
}

TEST(RecordIoTest, TruncationAndCorruptionAreDataLossNamingTheFile) {
  const std::string path = TempFile("damaged.tfrecord");
  auto writer = RecordWriter::Create(path);
  ASSERT_TRUE((*writer)->Write("first record").ok());
  ASSERT_TRUE((*writer)->Write("second record").ok());
  ASSERT_TRUE((*writer)->Close().ok());
  const auto size = std::filesystem::file_size(path);

  std::filesystem::resize_file(path, size - 3);
  auto reader = RecordReader::Open(path);
  std::string record;
  ASSERT_TRUE((*reader)->Read(&record).ok());
  absl::Status truncated = (*reader)->Read(&record);
  EXPECT_TRUE(absl::IsDataLoss(truncated)) << truncated;
  EXPECT_THAT(std::string(truncated.message()), HasSubstr(path));
  EXPECT_THAT(std::string(truncated.message()), HasSubstr("truncated"));

  {
    std::fstream file(path, std::ios::binary | std::ios::in | std::ios::out);
    file.seekp(14);
    file.put('X');  // inside the first payload
  }
  auto corrupt = RecordReader::Open(path);
  absl::Status status = (*corrupt)->Read(&record);
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("checksum"));
}

// A header whose length checksum is right but whose length is not (a
// damaged or hostile checkpoint) must not make the reader allocate the
// length: 2^39 bytes used to be resized before the read found the file short.
TEST(RecordIoTest, ALengthBeyondTheFileIsTruncationNotAnAllocation) {
  const std::string path = TempFile("huge_length.tfrecord");
  char header[12];
  const uint64_t length = uint64_t{1} << 39;
  for (int i = 0; i < 8; ++i) header[i] = static_cast<char>(length >> (8 * i));
  const uint32_t crc = MaskCrc(Crc32c(header, 8));
  for (int i = 0; i < 4; ++i) header[8 + i] = static_cast<char>(crc >> (8 * i));
  {
    std::ofstream file(path, std::ios::binary);
    file.write(header, sizeof(header));
    file << "a few payload bytes";
  }
  auto reader = RecordReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::string record;
  absl::Status status = (*reader)->Read(&record);
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("truncated record"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("at byte 0"));
  EXPECT_EQ((*reader)->offset(), 0);
}

TEST(RecordIoTest, MissingFileIsNotFound) {
  auto reader = RecordReader::Open(TempFile("does_not_exist"));
  EXPECT_TRUE(absl::IsNotFound(reader.status())) << reader.status();
}

}  // namespace
}  // namespace tf_reverb
