#include "server/logging/event_log.h"

#include <atomic>
#include <cstdio>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace tf_reverb {
namespace {

std::atomic<LogFormat> log_format{LogFormat::kText};

bool NeedsQuotes(absl::string_view value) {
  if (value.empty()) return true;
  for (char c : value) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20) {
      return true;
    }
  }
  return false;
}

// `value` inside double quotes, with quotes, backslashes and control
// characters escaped (valid as a JSON string and readable as text).
void AppendQuoted(absl::string_view value, std::string* out) {
  out->push_back('"');
  for (char c : value) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(out, absl::StrFormat("\\u%04x", static_cast<int>(c)));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

}  // namespace

void SetLogFormat(LogFormat format) { log_format.store(format); }
LogFormat GetLogFormat() { return log_format.load(); }

bool ParseLogFormat(absl::string_view name, LogFormat* format) {
  if (name == "text") {
    *format = LogFormat::kText;
  } else if (name == "json") {
    *format = LogFormat::kJson;
  } else {
    return false;
  }
  return true;
}

std::string FormatEvent(absl::Time time, absl::string_view component, absl::string_view event,
                        std::initializer_list<LogField> fields, LogFormat format) {
  const std::string ts = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
  std::string line;
  if (format == LogFormat::kJson) {
    line = "{\"ts\":";
    AppendQuoted(ts, &line);
    line.append(",\"component\":");
    AppendQuoted(component, &line);
    line.append(",\"event\":");
    AppendQuoted(event, &line);
    for (const LogField& field : fields) {
      line.push_back(',');
      AppendQuoted(field.key(), &line);
      line.push_back(':');
      if (field.bare_in_json()) {
        line.append(field.text());
      } else {
        AppendQuoted(field.text(), &line);
      }
    }
    line.push_back('}');
    return line;
  }
  line = absl::StrCat("ts=", ts, " component=", component, " event=", event);
  for (const LogField& field : fields) {
    absl::StrAppend(&line, " ", field.key(), "=");
    if (NeedsQuotes(field.text())) {
      AppendQuoted(field.text(), &line);
    } else {
      line.append(field.text());
    }
  }
  return line;
}

void LogEvent(absl::string_view component, absl::string_view event,
              std::initializer_list<LogField> fields) {
  std::string line = FormatEvent(absl::Now(), component, event, fields, GetLogFormat());
  line.push_back('\n');
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace tf_reverb
