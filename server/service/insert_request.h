// ReadInsertRequest: an InsertStreamRequest as the insert stream reads it off
// the wire (docs/architecture/wire-protocol.md), without parsing its chunks.
//
// A request's chunks are most of its bytes, and a table keeps each chunk as
// its wire encoding (server/table_chunk.h). Parsing a chunk into a ChunkData
// and encoding it again would copy its payload twice; here each chunk's
// bytes are copied once, from the gRPC slices they arrived in into a string
// of their own, which the table keeps (TableChunk::FromPlainWire). The rest of
// the request (its items and keep_chunk_keys, a few hundred bytes) is parsed
// by protobuf.
//
// That holds for requests whose chunks are all in the plain encoding
// (ChunkViewOfWire in server/chunk_view.h: what every writer sends) and
// whose top level is well-formed without groups. Any other request is
// parsed whole by protobuf (ParseRequest), so a request always means what
// protobuf reads in it, and is rejected with the same error.
//
// Contract: a pure function, thread-safe. On success, either `wire_chunks`
// holds the request's chunks in order and `request->chunks()` is empty, or
// `wire_chunks` is empty and `request` is the whole parsed request.
// INVALID_ARGUMENT as ParseRequest (server/service/raw_request.h).
#ifndef TF_REVERB_SERVER_SERVICE_INSERT_REQUEST_H_
#define TF_REVERB_SERVER_SERVICE_INSERT_REQUEST_H_

#include <vector>

#include "absl/status/status.h"
#include "grpcpp/support/byte_buffer.h"
#include "reverb_service.pb.h"
#include "server/service/server_insert_stream.h"

namespace tf_reverb {

absl::Status ReadInsertRequest(const grpc::ByteBuffer& bytes,
                               deepmind::reverb::InsertStreamRequest* request,
                               std::vector<ServerInsertStream::WireChunk>* wire_chunks);

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_SERVICE_INSERT_REQUEST_H_
