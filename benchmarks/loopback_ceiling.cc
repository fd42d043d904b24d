// The machine's ceiling for moving sampled bytes, measured the way
// benchmarks/sample_throughput.py's large-item workloads move them:
//
//  * grpc: a loopback gRPC stream (the system gRPC our core links) whose
//    server (a child process, as the benchmark's server is another process)
//    writes messages of --message_bytes, and of as many of those as fit in
//    2 MiB (our server's response size), the faster counting (one pre-built
//    slice, so the
//    sender copies nothing itself) and whose client reads them with the
//    synchronous API, as our sampler does, on a channel advertising HTTP/2
//    frames of --max_frame_size (default 1 MiB, as our client's channel;
//    also measured with gRPC's default 16 KiB frames); "grpc+copy" also
//    copies every message into the rows of a rotating batch buffer (--batch
//    rows) on the reading thread.
//  * memcpy: the same messages copied from a table-sized source (so reads
//    miss the cache as a sampler's do) into the rows of the batch buffer.
//
// Prints one JSON line: {"grpc_mb_per_s", "grpc_default_frames_mb_per_s",
// "grpc_copy_mb_per_s", "memcpy_mb_per_s", ...} (MB = 1e6 bytes).
//
//   bazel run -c opt //benchmarks:loopback_ceiling -- --seconds 2
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/codegen/sync_stream.h"
#include "grpcpp/support/byte_buffer.h"

namespace {

constexpr char kMethod[] = "/ceiling.Ceiling/Stream";

// Writes the same message until the client ends the call.
class StreamReactor : public grpc::ServerGenericBidiReactor {
 public:
  explicit StreamReactor(const grpc::ByteBuffer& message) : message_(message) {
    StartRead(&request_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);
      return;
    }
    StartWrite(&message_);
  }
  void OnWriteDone(bool ok) override {
    if (ok) {
      StartWrite(&message_);
    } else {
      Finish(grpc::Status::OK);  // the client cancelled
    }
  }
  void OnCancel() override {}
  void OnDone() override { delete this; }

 private:
  grpc::ByteBuffer request_;
  grpc::ByteBuffer message_;
};

class StreamService : public grpc::CallbackGenericService {
 public:
  explicit StreamService(size_t bytes) {
    std::string payload(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i) payload[i] = static_cast<char>(rand());
    grpc::Slice slice(payload);
    message_ = grpc::ByteBuffer(&slice, 1);
  }
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    return new StreamReactor(message_);
  }

 private:
  grpc::ByteBuffer message_;
};

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// MB/s of one stream read for `seconds` (after a warm-up); copies every
// message into `batch` when it is not empty.
double StreamRate(const std::shared_ptr<grpc::Channel>& channel, double seconds,
                  std::vector<char>* batch, size_t message_bytes) {
  grpc::ClientContext context;
  auto stream = std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>>(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel.get(),
          grpc::internal::RpcMethod(kMethod, grpc::internal::RpcMethod::BIDI_STREAMING), &context));
  grpc::Slice hello("go");
  grpc::ByteBuffer request(&hello, 1);
  stream->Write(request);
  grpc::ByteBuffer message;
  const size_t rows = batch->empty() ? 1 : batch->size() / message_bytes;
  size_t row = 0;
  auto read_one = [&]() {
    if (!stream->Read(&message)) {
      std::fprintf(stderr, "stream ended\n");
      std::exit(1);
    }
    if (batch->empty()) return;
    std::vector<grpc::Slice> slices;
    message.Dump(&slices);
    char* dst = batch->data() + (row++ % rows) * message_bytes;
    for (const grpc::Slice& slice : slices) {
      std::memcpy(dst, slice.begin(), slice.size());
      dst += slice.size();
    }
  };
  for (int i = 0; i < 64; ++i) read_one();
  size_t bytes = 0;
  const auto start = std::chrono::steady_clock::now();
  while (Seconds(start) < seconds) {
    read_one();
    bytes += message_bytes;
  }
  const double rate = bytes / Seconds(start) / 1e6;
  context.TryCancel();
  stream->Finish().IgnoreError();
  return rate;
}

double MemcpyRate(double seconds, std::vector<char>* batch, size_t message_bytes) {
  const size_t source_messages = 200;  // a table of the benchmark's size
  std::vector<char> source(source_messages * message_bytes, 1);
  const size_t rows = batch->size() / message_bytes;
  size_t bytes = 0, i = 0;
  const auto start = std::chrono::steady_clock::now();
  while (Seconds(start) < seconds) {
    std::memcpy(batch->data() + (i % rows) * message_bytes,
                source.data() + ((i * 7919) % source_messages) * message_bytes, message_bytes);
    ++i;
    bytes += message_bytes;
  }
  return bytes / Seconds(start) / 1e6;
}

}  // namespace

// Serves in a child process until killed; returns the child's pid and port.
std::pair<pid_t, int> StartServer(size_t message_bytes) {
  int fds[2];
  if (pipe(fds) != 0) std::exit(1);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    StreamService service(message_bytes);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterCallbackGenericService(&service);
    builder.SetMaxSendMessageSize(-1);
    builder.SetMaxReceiveMessageSize(-1);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (write(fds[1], &port, sizeof(port)) != sizeof(port)) _exit(1);
    while (true) pause();
  }
  close(fds[1]);
  int port = 0;
  if (read(fds[0], &port, sizeof(port)) != sizeof(port) || port == 0) {
    std::fprintf(stderr, "the server did not start\n");
    std::exit(1);
  }
  close(fds[0]);
  return {pid, port};
}

void StopServer(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

int main(int argc, char** argv) {
  double seconds = 2;
  size_t message_bytes = 10 * 84 * 84 * 4;
  size_t batch_rows = 64;
  // What our client's channel advertises (server/client/client.cc); 0 for gRPC's
  // default (16 KiB).
  int max_frame_size = 1 << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--seconds") seconds = std::atof(argv[i + 1]);
    if (flag == "--message_bytes") message_bytes = std::strtoull(argv[i + 1], nullptr, 10);
    if (flag == "--batch") batch_rows = std::strtoull(argv[i + 1], nullptr, 10);
    if (flag == "--max_frame_size") max_frame_size = std::atoi(argv[i + 1]);
  }
  const size_t per_response = std::max<size_t>(1, (2 << 20) / message_bytes) * message_bytes;
  std::vector<char> none;
  std::vector<char> batch(batch_rows * message_bytes, 0);
  double grpc_rate = 0, default_rate = 0, grpc_copy_rate = 0;
  // Both servers are forked before this process uses gRPC.
  std::vector<std::pair<pid_t, int>> servers = {StartServer(message_bytes),
                                                StartServer(per_response)};
  for (size_t i = 0; i < servers.size(); ++i) {
    const size_t bytes = i == 0 ? message_bytes : per_response;
    auto [pid, port] = servers[i];
    const std::string address = "127.0.0.1:" + std::to_string(port);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    if (max_frame_size > 0) args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, max_frame_size);
    auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
    grpc::ChannelArguments default_args;
    default_args.SetMaxReceiveMessageSize(-1);
    // Another channel (the arguments differ), so another connection.
    auto default_channel =
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), default_args);
    std::vector<char> rows(std::max<size_t>(1, batch.size() / bytes) * bytes, 0);
    default_rate = std::max(default_rate, StreamRate(default_channel, seconds, &none, bytes));
    grpc_rate = std::max(grpc_rate, StreamRate(channel, seconds, &none, bytes));
    grpc_copy_rate = std::max(grpc_copy_rate, StreamRate(channel, seconds, &rows, bytes));
    StopServer(pid);
  }
  const double memcpy_rate = MemcpyRate(seconds, &batch, message_bytes);
  std::printf(
      "{\"grpc_mb_per_s\": %.1f, \"grpc_default_frames_mb_per_s\": %.1f, "
      "\"grpc_copy_mb_per_s\": %.1f, \"memcpy_mb_per_s\": %.1f, \"message_bytes\": %zu, "
      "\"max_frame_size\": %d}\n",
      grpc_rate, default_rate, grpc_copy_rate, memcpy_rate, message_bytes, max_frame_size);
  std::fflush(stdout);
  return 0;
}
