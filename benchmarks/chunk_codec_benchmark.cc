// Compares the chunk codecs (Snappy, Reverb's; zstd, our extension) on
// typical RL chunks: compression ratio, compression and decompression speed
// of whole chunk tensors, and the cost of decoding one row of a chunk (what a
// sampled item needs), for Snappy, zstd levels 1 and 3 and the writers'
// per-chunk choice CodecPolicy::kAuto ("auto:zs" = it picked zstd, "auto:sn"
// = Snappy). Prints a table; nothing is asserted.
//
//   bazel run -c opt //benchmarks:chunk_codec_benchmark -- [seconds_per_cell]
//
// MB/s are of uncompressed bytes (1 MB = 1e6 bytes). Absolute numbers on
// shared machines are noisy; compare the rows of one run.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "schema.pb.h"
#include "server/chunk_codec.h"
#include "server/chunk_view.h"
#include "server/tensor.h"
#include "tensor.pb.h"

namespace tf_reverb {
namespace {

namespace tfp = ::tf_reverb::tf;

constexpr int kChunkLength = 10;  // steps per chunk (Reverb's usual)
constexpr int kChunksPerDataset = 16;

struct Dataset {
  std::string name;
  std::vector<Tensor> chunks;  // stacked [kChunkLength, ...] tensors
};

Tensor MakeTensor(DataType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data.resize(t.num_elements() * DataTypeSize(dtype).value());
  return t;
}

// Gaussian float32 observations: what a feature vector of a continuous
// control task looks like to a compressor (nearly incompressible mantissas).
Dataset RandomFloats(std::mt19937* gen, int64_t dims) {
  Dataset d{"float32 obs [10," + std::to_string(dims) + "] random normal", {}};
  std::normal_distribution<float> normal;
  for (int c = 0; c < kChunksPerDataset; ++c) {
    Tensor t = MakeTensor(tfp::DT_FLOAT, {kChunkLength, dims});
    float* v = reinterpret_cast<float*>(t.data.data());
    for (int64_t i = 0; i < t.num_elements(); ++i) v[i] = normal(*gen);
    d.chunks.push_back(std::move(t));
  }
  return d;
}

// Smooth float32 states (joint angles/velocities drifting step to step),
// with some constant dimensions (padding, fixed targets).
Dataset SmoothFloats(std::mt19937* gen) {
  Dataset d{"float32 obs [10,64] smooth+const", {}};
  std::uniform_real_distribution<float> uniform(-1, 1);
  for (int c = 0; c < kChunksPerDataset; ++c) {
    Tensor t = MakeTensor(tfp::DT_FLOAT, {kChunkLength, 64});
    float* v = reinterpret_cast<float*>(t.data.data());
    std::vector<float> phase(64), freq(64);
    for (int j = 0; j < 64; ++j) {
      phase[j] = uniform(*gen) * 3;
      freq[j] = 0.05f + 0.05f * uniform(*gen);
    }
    for (int s = 0; s < kChunkLength; ++s) {
      for (int j = 0; j < 64; ++j) {
        v[s * 64 + j] = j >= 48 ? (j % 4 == 0 ? 1.0f : 0.0f)
                                : std::sin(phase[j] + freq[j] * (c * kChunkLength + s));
      }
    }
    d.chunks.push_back(std::move(t));
  }
  return d;
}

// One 84x84 grey Atari-like frame at time `t`: flat background bands, a
// vertical gradient in the sky, a score strip and a few moving sprites.
void DrawFrame(int t, uint8_t* out) {
  for (int y = 0; y < 84; ++y) {
    for (int x = 0; x < 84; ++x) {
      uint8_t v;
      if (y < 8)
        v = ((x / 4 + t / 16) % 5 == 0) ? 200 : 0;  // score strip
      else if (y < 40)
        v = static_cast<uint8_t>(60 + y);  // gradient sky
      else if (y < 70)
        v = 110;  // play field
      else
        v = (x % 8 < 4) ? 40 : 44;  // textured floor
      out[y * 84 + x] = v;
    }
  }
  for (int s = 0; s < 4; ++s) {  // sprites
    const int sx = (7 + 13 * s + 3 * t * (s + 1)) % 76;
    const int sy = 42 + (11 * s + t) % 24;
    for (int y = sy; y < sy + 6; ++y) {
      for (int x = sx; x < sx + 6; ++x) out[y * 84 + x] = static_cast<uint8_t>(150 + 25 * s);
    }
  }
}

// DQN observations: each step is a stack of the last 4 frames, so consecutive
// steps share 3 of their 4 frames (the main redundancy of Atari replay).
Dataset AtariFrames() {
  Dataset d{"uint8 [10,84,84,4] Atari-like", {}};
  std::vector<std::vector<uint8_t>> frames;
  for (int f = 0; f < kChunksPerDataset * kChunkLength + 4; ++f) {
    frames.emplace_back(84 * 84);
    DrawFrame(f, frames.back().data());
  }
  for (int c = 0; c < kChunksPerDataset; ++c) {
    Tensor t = MakeTensor(tfp::DT_UINT8, {kChunkLength, 84, 84, 4});
    uint8_t* v = reinterpret_cast<uint8_t*>(t.data.data());
    for (int s = 0; s < kChunkLength; ++s) {
      const int step = c * kChunkLength + s;
      for (int p = 0; p < 84 * 84; ++p) {
        for (int k = 0; k < 4; ++k) v[(s * 84 * 84 + p) * 4 + k] = frames[step + k][p];
      }
    }
    d.chunks.push_back(std::move(t));
  }
  return d;
}

Dataset RandomFrames(std::mt19937* gen) {
  Dataset d{"uint8 [10,84,84,4] random", {}};
  for (int c = 0; c < kChunksPerDataset; ++c) {
    Tensor t = MakeTensor(tfp::DT_UINT8, {kChunkLength, 84, 84, 4});
    for (char& b : t.data) b = static_cast<char>((*gen)() & 0xff);
    d.chunks.push_back(std::move(t));
  }
  return d;
}

// Discrete actions (18 Atari actions), 100 steps per chunk so the tensor is
// not just a frame header.
Dataset Actions(std::mt19937* gen) {
  Dataset d{"int32 actions [100] in [0,18)", {}};
  std::uniform_int_distribution<int32_t> action(0, 17);
  for (int c = 0; c < kChunksPerDataset; ++c) {
    Tensor t = MakeTensor(tfp::DT_INT32, {100});
    int32_t* v = reinterpret_cast<int32_t*>(t.data.data());
    for (int i = 0; i < 100; ++i) v[i] = action(*gen);
    d.chunks.push_back(std::move(t));
  }
  return d;
}

struct Codec {
  std::string name;
  CodecPolicy policy;
  int level;
};

// Runs `body` (which processes `bytes` raw bytes) repeatedly for at least
// `seconds`; returns raw MB/s.
template <typename F>
double Throughput(double seconds, int64_t bytes, F body) {
  int64_t iterations = 0;
  const absl::Time start = absl::Now();
  absl::Duration elapsed;
  do {
    body(iterations);
    ++iterations;
    elapsed = absl::Now() - start;
  } while (elapsed < absl::Seconds(seconds));
  return static_cast<double>(bytes) * iterations / absl::ToDoubleSeconds(elapsed) / 1e6;
}

void Run(double seconds) {
  std::mt19937 gen(42);
  std::vector<Dataset> datasets = {RandomFloats(&gen, 64), RandomFloats(&gen, 4096),
                                   SmoothFloats(&gen),     AtariFrames(),
                                   RandomFrames(&gen),     Actions(&gen)};
  const std::vector<Codec> codecs = {{"snappy", CodecPolicy::kSnappy, 0},
                                     {"zstd-1", CodecPolicy::kZstd, 1},
                                     {"zstd-3", CodecPolicy::kZstd, 3},
                                     {"auto", CodecPolicy::kAuto, kDefaultZstdLevel}};
  std::printf("%-36s %-7s %7s %12s %12s %10s\n", "data (one chunk)", "codec", "ratio", "comp MB/s",
              "decomp MB/s", "1-row us");
  for (const Dataset& d : datasets) {
    const int64_t raw = static_cast<int64_t>(d.chunks[0].data.size());
    for (const Codec& codec : codecs) {
      std::vector<tfp::TensorProto> protos;
      ChunkCompression picked = kSnappy;
      int64_t compressed = 0;
      for (const Tensor& t : d.chunks) {
        deepmind::reverb::ChunkData chunk =
            BuildChunk(1, {t}, 1, 0, 0, false, codec.policy, codec.level).value();
        picked = chunk.compression();
        protos.push_back(chunk.data().tensors(0));
        compressed += protos.back().tensor_content().size();
      }
      const double ratio = static_cast<double>(raw) * d.chunks.size() / compressed;
      const double comp = Throughput(seconds, raw, [&](int64_t i) {
        auto chunk = BuildChunk(1, {d.chunks[i % d.chunks.size()]}, 1, 0, 0, false, codec.policy,
                                codec.level);
        if (!chunk.ok()) std::abort();
      });
      std::string out(raw, '\0');
      const int64_t rows = d.chunks[0].num_rows();
      const double decomp = Throughput(seconds, raw, [&](int64_t i) {
        if (!DecompressRowsInto(protos[i % protos.size()], false, picked, 0, rows, out.data())
                 .ok()) {
          std::abort();
        }
      });
      // One row at a varying offset: the sampling path for an item of
      // length 1 (sequence items decode several rows, whole chunks above).
      const int64_t row_bytes = raw / rows;
      const double row_rate = Throughput(seconds, row_bytes, [&](int64_t i) {
        if (!DecompressRowsInto(protos[i % protos.size()], false, picked, (i * 7) % rows, 1,
                                out.data())
                 .ok()) {
          std::abort();
        }
      });
      const double row_us = static_cast<double>(row_bytes) / row_rate;
      const std::string name = codec.policy == CodecPolicy::kAuto
                                   ? (picked == kZstd ? "auto:zs" : "auto:sn")
                                   : codec.name;
      std::printf("%-36s %-7s %7.2f %12.0f %12.0f %10.2f\n", d.name.c_str(), name.c_str(), ratio,
                  comp, decomp, row_us);
    }
  }
}

}  // namespace
}  // namespace tf_reverb

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 0.5;
  tf_reverb::Run(seconds > 0 ? seconds : 0.5);
  return 0;
}
