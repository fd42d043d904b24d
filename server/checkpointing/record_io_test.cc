#include "server/checkpointing/record_io.h"

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <ios>
#include <iterator>
#include <string>
#include <vector>

#include "absl/status/status.h"
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

// Whichever implementation runs (the CPU's crc32 instruction or tables), it
// equals the bit-by-bit definition at every length and alignment.
TEST(Crc32cTest, EqualsTheBitwiseDefinitionAtEveryLengthAndOffset) {
  auto bitwise = [](const unsigned char* p, size_t n) {
    uint32_t crc = ~0u;
    for (size_t i = 0; i < n; ++i) {
      crc ^= p[i];
      for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
    }
    return ~crc;
  };
  std::string data(300, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t n = 0; offset + n <= data.size(); n += 7) {
      ASSERT_EQ(Crc32c(bytes + offset, n), bitwise(bytes + offset, n)) << offset << " " << n;
    }
  }
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

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// `bytes` deflated as one zlib stream (what TFRecord's "ZLIB" option writes).
std::string Deflate(const std::string& bytes) {
  uLongf size = compressBound(bytes.size());
  std::string out(size, '\0');
  EXPECT_EQ(compress2(reinterpret_cast<Bytef*>(out.data()), &size,
                      reinterpret_cast<const Bytef*>(bytes.data()), bytes.size(), 6),
            Z_OK);
  out.resize(size);
  return out;
}

// Records written uncompressed; returns the file's bytes.
std::string RecordFile(const std::string& path, const std::vector<std::string>& records) {
  auto writer = RecordWriter::Create(path);
  EXPECT_TRUE(writer.ok()) << writer.status();
  for (const std::string& record : records) EXPECT_TRUE((*writer)->Write(record).ok());
  EXPECT_TRUE((*writer)->Close().ok());
  return ReadAll(path);
}

std::vector<std::string> ReadRecords(const std::string& path, absl::Status* end) {
  std::vector<std::string> records;
  auto reader = RecordReader::Open(path);
  if (!reader.ok()) {
    *end = reader.status();
    return records;
  }
  std::string record;
  while ((*end = (*reader)->Read(&record)).ok()) records.push_back(record);
  return records;
}

TEST(RecordIoTest, ReadsZlibCompressedFilesAsDmReverbWritesThem) {
  const std::vector<std::string> records = {"", "abc", std::string(3 << 20, 'y'), "tail"};
  const std::string plain = RecordFile(TempFile("plain.tfrecord"), records);
  const std::string compressed = TempFile("compressed.tfrecord");
  WriteAll(compressed, Deflate(plain));
  absl::Status end;
  EXPECT_EQ(ReadRecords(compressed, &end), records);
  EXPECT_TRUE(absl::IsOutOfRange(end)) << end;
  EXPECT_TRUE(RecordReader::Open(compressed).value()->compressed());
  EXPECT_FALSE(RecordReader::Open(TempFile("plain.tfrecord")).value()->compressed());

  // Two streams one after the other read as one sequence of records.
  const std::string twice = TempFile("two_streams.tfrecord");
  WriteAll(twice, Deflate(plain) + Deflate(plain));
  std::vector<std::string> doubled = records;
  doubled.insert(doubled.end(), records.begin(), records.end());
  EXPECT_EQ(ReadRecords(twice, &end), doubled);
  EXPECT_TRUE(absl::IsOutOfRange(end)) << end;

  // An empty compressed stream is an empty file of records.
  const std::string empty = TempFile("empty_stream.tfrecord");
  WriteAll(empty, Deflate(""));
  EXPECT_TRUE(ReadRecords(empty, &end).empty());
  EXPECT_TRUE(absl::IsOutOfRange(end)) << end;
}

TEST(RecordIoTest, WritesZlibCompressedFilesAsTfRecordsZlibOption) {
  // Records of every size, incompressible ones among them, so that deflate
  // fills its output buffer several times.
  std::string random(1 << 20, '\0');
  uint64_t state = 88172645463325252u;
  for (char& c : random) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    c = static_cast<char>(state);
  }
  const std::vector<std::string> records = {"", "abc", std::string(3 << 20, 'y'), random, "tail"};
  const std::string path = TempFile("written_compressed.tfrecord");
  auto writer = RecordWriter::Create(path, /*compressed=*/true);
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (const std::string& record : records) ASSERT_TRUE((*writer)->Write(record).ok());
  ASSERT_TRUE((*writer)->Close().ok());
  EXPECT_EQ((*writer)->bytes_written(), static_cast<int64_t>(std::filesystem::file_size(path)));
  EXPECT_TRUE(RecordReader::Open(path).value()->compressed());
  absl::Status end;
  EXPECT_EQ(ReadRecords(path, &end), records);
  EXPECT_TRUE(absl::IsOutOfRange(end)) << end;
  // The file is the zlib stream of the plain records (as TensorFlow's
  // "ZLIB" option writes): inflated, it is the uncompressed file.
  std::ifstream in(path, std::ios::binary);
  const std::string deflated((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  const std::string plain = RecordFile(TempFile("plain3.tfrecord"), records);
  std::string inflated(plain.size(), '\0');
  uLongf size = inflated.size();
  ASSERT_EQ(uncompress(reinterpret_cast<Bytef*>(inflated.data()), &size,
                       reinterpret_cast<const Bytef*>(deflated.data()), deflated.size()),
            Z_OK);
  EXPECT_EQ(size, plain.size());
  EXPECT_EQ(inflated, plain);
  // Compressible records take less room.
  EXPECT_LT((*writer)->bytes_written(), static_cast<int64_t>(inflated.size()) - (3 << 20) / 2);
}

TEST(RecordIoTest, TruncatedOrCorruptCompressedFilesAreDataLossNamingTheFile) {
  const std::string plain =
      RecordFile(TempFile("plain2.tfrecord"), {"first", std::string(100000, 'z'), "last"});
  const std::string deflated = Deflate(plain);
  // Cut anywhere (even where the records inside happen to end), the stream's
  // end and checksum are missing.
  for (size_t keep : {deflated.size() - 1, deflated.size() - 4, deflated.size() / 2, size_t{3}}) {
    const std::string path = TempFile("cut.tfrecord");
    WriteAll(path, deflated.substr(0, keep));
    absl::Status end;
    ReadRecords(path, &end);
    EXPECT_TRUE(absl::IsDataLoss(end)) << keep << ": " << end;
    EXPECT_THAT(end.message(), HasSubstr(path)) << keep;
  }
  // A flipped byte in the deflated data.
  std::string damaged = deflated;
  damaged[damaged.size() / 2] ^= 0x5a;
  const std::string path = TempFile("damaged.tfrecord");
  WriteAll(path, damaged);
  absl::Status end;
  ReadRecords(path, &end);
  EXPECT_TRUE(absl::IsDataLoss(end)) << end;
  EXPECT_THAT(end.message(), HasSubstr(path));
}

TEST(RecordIoTest, MissingFileIsNotFound) {
  auto reader = RecordReader::Open(TempFile("does_not_exist"));
  EXPECT_TRUE(absl::IsNotFound(reader.status())) << reader.status();
}

}  // namespace
}  // namespace tf_reverb
