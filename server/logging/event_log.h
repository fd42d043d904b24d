// Event log: the server's operator-facing log, one line per event that
// matters (start, tables, checkpoints written and restored, client summaries,
// errors), never one per item.
//
// A line is `ts=<UTC, ms> component=<c> event=<e> key=value ...` (the text
// format, the default; values holding spaces, quotes, '=' or nothing are
// double-quoted with `\"` and `\\` escaped), or with SetLogFormat(kJson) one
// JSON object per line: {"ts":"...","component":"...","event":"...",
// "key":value,...}, numbers and booleans as JSON numbers and booleans, in
// the order given. Lines go to stderr, each written with one call and
// flushed, so lines of concurrent writers never interleave.
//
// Contract:
//  * Thread-safety: LogEvent and SetLogFormat may be called from any thread.
//  * Ownership: nothing is retained; fields are copied into the line.
//  * Errors: none; a failed write to stderr is ignored (logging never fails
//    the operation that logs).
#ifndef TF_REVERB_SERVER_LOGGING_EVENT_LOG_H_
#define TF_REVERB_SERVER_LOGGING_EVENT_LOG_H_

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace tf_reverb {

enum class LogFormat { kText, kJson };

// Process-wide; kText until changed.
void SetLogFormat(LogFormat format);
LogFormat GetLogFormat();
// "text" or "json"; false for anything else.
bool ParseLogFormat(absl::string_view name, LogFormat* format);

// One field of an event: a string, an integer, a floating-point number or a
// boolean (the JSON format keeps the kind; a non-finite number is written as
// a string there).
class LogField {
 public:
  LogField(absl::string_view key, absl::string_view value)
      : key_(key), text_(value), kind_(Kind::kString) {}
  LogField(absl::string_view key, const std::string& value)
      : key_(key), text_(value), kind_(Kind::kString) {}
  LogField(absl::string_view key, const char* value)
      : key_(key), text_(value), kind_(Kind::kString) {}
  LogField(absl::string_view key, bool value)
      : key_(key), text_(value ? "true" : "false"), kind_(Kind::kBool) {}
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  LogField(absl::string_view key, T value)
      : key_(key), text_(absl::StrCat(value)), kind_(Kind::kNumber) {}
  template <typename T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  LogField(absl::string_view key, T value)
      : key_(key),
        text_(absl::StrCat(value)),
        kind_(std::isfinite(value) ? Kind::kNumber : Kind::kString) {}

  const std::string& key() const { return key_; }
  const std::string& text() const { return text_; }
  // Whether JSON writes the text as it is (a number or a boolean).
  bool bare_in_json() const { return kind_ != Kind::kString; }

 private:
  enum class Kind { kString, kNumber, kBool };
  std::string key_;
  std::string text_;
  Kind kind_;
};

// The line (without the newline) LogEvent writes; exposed for tests.
std::string FormatEvent(absl::Time time, absl::string_view component, absl::string_view event,
                        std::initializer_list<LogField> fields, LogFormat format);

// Writes one event line to stderr in the process's format.
void LogEvent(absl::string_view component, absl::string_view event,
              std::initializer_list<LogField> fields = {});

}  // namespace tf_reverb

#endif  // TF_REVERB_SERVER_LOGGING_EVENT_LOG_H_
