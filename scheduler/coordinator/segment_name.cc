#include "scheduler/coordinator/segment_name.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "scheduler/coordinator/segment_layout.h"

namespace gpuprio::coordinator {

bool ValidDomain(absl::string_view domain) {
  if (domain.empty() || domain.size() > 64) return false;
  for (char c : domain) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') {
      return false;
    }
  }
  return domain != "." && domain != "..";
}

std::string UuidString(const uint8_t (&uuid)[16]) {
  std::string out = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    absl::StrAppendFormat(&out, "%02x", uuid[i]);
  }
  return out;
}

}  // namespace gpuprio::coordinator
