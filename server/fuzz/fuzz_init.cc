// Linked into every fuzz target: protobuf logs an ERROR line for each string
// field with invalid UTF-8 it parses, which fuzzed inputs do constantly; the
// parse result (not the log) is what the targets check, so the log is off.
#include "google/protobuf/stubs/logging.h"

namespace tf_reverb {
namespace fuzz {
namespace {

const bool kProtobufLogOff = [] {
  google::protobuf::SetLogHandler(nullptr);
  return true;
}();

}  // namespace
}  // namespace fuzz
}  // namespace tf_reverb
