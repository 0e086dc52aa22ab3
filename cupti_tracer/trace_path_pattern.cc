#include "cupti_tracer/trace_path_pattern.h"

#include <limits.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace gpuprio::tracer {
namespace {

bool IsVariableName(absl::string_view name) {
  if (name.empty() || absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace

ExpandedTracePath ExpandTracePath(absl::string_view pattern, const TracePathContext& context,
                                  GetenvFunction getenv) {
  ExpandedTracePath out;
  const auto warn = [&](absl::string_view what) {
    out.warnings.push_back(
        absl::StrCat("GPUPRIO_TRACE=\"", pattern, "\": ", what, "; kept literally"));
  };
  size_t i = 0;
  while (i < pattern.size()) {
    const size_t percent = pattern.find('%', i);
    if (percent == absl::string_view::npos) {
      absl::StrAppend(&out.path, pattern.substr(i));
      break;
    }
    absl::StrAppend(&out.path, pattern.substr(i, percent - i));
    if (percent + 1 >= pattern.size()) {
      warn("a % at the end of the name (write %% for a literal %)");
      out.path.push_back('%');
      break;
    }
    const char spec = pattern[percent + 1];
    i = percent + 2;
    switch (spec) {
      case '%':
        out.path.push_back('%');
        break;
      case 'p':
        absl::StrAppend(&out.path, context.pid);
        break;
      case 'h':
        absl::StrAppend(&out.path, context.hostname);
        break;
      case 'q': {
        const size_t close = pattern.find('}', i);
        absl::string_view name;
        if (i < pattern.size() && pattern[i] == '{' && close != absl::string_view::npos) {
          name = pattern.substr(i + 1, close - i - 1);
        }
        if (!IsVariableName(name)) {
          warn("%q must be followed by {NAME}, an environment variable's name");
          absl::StrAppend(&out.path, "%q");
          break;
        }
        const absl::string_view whole = pattern.substr(percent, close + 1 - percent);
        i = close + 1;
        const char* value = getenv(std::string(name).c_str());
        if (value == nullptr || *value == '\0') {
          warn(absl::StrCat(whole, ": ", name, value == nullptr ? " is not set" : " is empty"));
          absl::StrAppend(&out.path, whole);
        } else {
          absl::StrAppend(&out.path, value);
        }
        break;
      }
      default:
        warn(absl::StrCat("%", std::string(1, spec),
                          " is not a placeholder (known: %p, %h, %q{VAR}, %%)"));
        out.path.push_back('%');
        out.path.push_back(spec);
        break;
    }
  }
  return out;
}

TracePathContext CurrentTracePathContext() {
  TracePathContext context;
  context.pid = static_cast<long>(getpid());
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') {
    context.hostname = host;
  } else {
    context.hostname = "localhost";
  }
  return context;
}

}  // namespace gpuprio::tracer
