// The shared segment's layout is written down three times: in C++ (the contract,
// scheduler/coordinator/segment_layout.h), in the launcher's package
// (tools/cli/gpuprio_cli/segment_layout.py: `top`, `doctor`, `clean-segments` and `exporter` read
// segments with it) and in the tests' segment writer
// (tests/tools/segment_writer.py). Each Python copy is loaded here and must give every field it
// names the C++ offset and size, and the constants their C++ values.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "catch2/catch.hpp"
#include "scheduler/coordinator/segment_layout.h"
#include "tests/runfiles.h"

namespace {

using gpuprio::coordinator::ProcessSlot;
using gpuprio::coordinator::SegmentHeader;

struct Field {
  size_t offset;
  size_t size;
};

#define GP_FIELD(type, name) \
  { #name, Field{offsetof(type, name), sizeof(type::name)} }

const std::map<std::string, Field>& HeaderFields() {
  static const auto* fields = new std::map<std::string, Field>{
      GP_FIELD(SegmentHeader, magic),          GP_FIELD(SegmentHeader, layout_version),
      GP_FIELD(SegmentHeader, header_bytes),   GP_FIELD(SegmentHeader, slot_bytes),
      GP_FIELD(SegmentHeader, slot_count),     GP_FIELD(SegmentHeader, device_uuid),
      GP_FIELD(SegmentHeader, ready),          GP_FIELD(SegmentHeader, creator_pid),
      GP_FIELD(SegmentHeader, priority_high_water), GP_FIELD(SegmentHeader, claims),
      GP_FIELD(SegmentHeader, level_drops),    GP_FIELD(SegmentHeader, drop_sleepers),
  };
  return *fields;
}

const std::map<std::string, Field>& SlotFields() {
  static const auto* fields = new std::map<std::string, Field>{
      GP_FIELD(ProcessSlot, state_word),       GP_FIELD(ProcessSlot, pid),
      GP_FIELD(ProcessSlot, start_time_ticks), GP_FIELD(ProcessSlot, pid_namespace),
      GP_FIELD(ProcessSlot, heartbeat),        GP_FIELD(ProcessSlot, default_priority),
      GP_FIELD(ProcessSlot, active_priority),  GP_FIELD(ProcessSlot, max_seen_priority),
      GP_FIELD(ProcessSlot, held),             GP_FIELD(ProcessSlot, command),
      GP_FIELD(ProcessSlot, ops_dispatched),   GP_FIELD(ProcessSlot, ops_direct),
      GP_FIELD(ProcessSlot, queued_ops),       GP_FIELD(ProcessSlot, queued_estimated_ns),
      GP_FIELD(ProcessSlot, in_flight_ops),    GP_FIELD(ProcessSlot, in_flight_estimated_ns),
      GP_FIELD(ProcessSlot, held_ns_total),    GP_FIELD(ProcessSlot, delay_histogram),
      GP_FIELD(ProcessSlot, level_last_submit_unix_ns),
      GP_FIELD(ProcessSlot, isolation_reserved_sms),
      GP_FIELD(ProcessSlot, isolation_device_sms),
      GP_FIELD(ProcessSlot, confined_in_flight_ops),
      GP_FIELD(ProcessSlot, confined_in_flight_estimated_ns),
      GP_FIELD(ProcessSlot, last_drop),
      GP_FIELD(ProcessSlot, last_whole_device),
  };
  return *fields;
}

const std::map<std::string, Field>& LevelRowFields() {
  using gpuprio::coordinator::LevelRow;
  static const auto* fields = new std::map<std::string, Field>{
      GP_FIELD(LevelRow, level_key),    GP_FIELD(LevelRow, ops_dispatched),
      GP_FIELD(LevelRow, ops_direct),   GP_FIELD(LevelRow, ops_confined),
      GP_FIELD(LevelRow, delay_histogram),
  };
  return *fields;
}

#undef GP_FIELD

// Loads the Python file at `path` as a module and prints, one per line, "CONST name value" for
// each name of `consts` it defines, and "FIELD table field offset size" for each (offset, struct
// format) entry of the dicts named in `tables` (size: struct.calcsize of the format).
constexpr char kDumper[] = R"PY(
import importlib.machinery, importlib.util, struct, sys
path, consts, tables = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(",")
loader = importlib.machinery.SourceFileLoader("layout_under_test", path)
spec = importlib.util.spec_from_loader(loader.name, loader)
module = importlib.util.module_from_spec(spec)
loader.exec_module(module)
for name in consts:
    if hasattr(module, name):
        value = getattr(module, name)
        print("CONST", name, value.hex() if isinstance(value, bytes) else int(value))
for table in tables:
    for field, (offset, fmt) in getattr(module, table).items():
        print("FIELD", table, field, offset, struct.calcsize(fmt))
)PY";

struct PythonView {
  std::map<std::string, std::string> consts;
  std::map<std::string, std::map<std::string, Field>> tables;
};

PythonView Load(const std::string& runfile, const std::string& consts, const std::string& tables) {
  auto path = gpuprio_test::Runfile(runfile);
  REQUIRE(path.ok());
  auto result = gpuprio_test::RunProcess(
      {"/usr/bin/env", "python3", "-I", "-S", "-B", "-c", kDumper, *path, consts, tables}, {});
  REQUIRE(result.ok());
  INFO("stdout:\n" << result->stdout_text << "\nstderr:\n" << result->stderr_text);
  REQUIRE(result->exit_code == 0);
  PythonView view;
  for (absl::string_view line : absl::StrSplit(result->stdout_text, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() == 3 && f[0] == "CONST") {
      view.consts[f[1]] = f[2];
    } else if (f.size() == 5 && f[0] == "FIELD") {
      size_t offset = 0, size = 0;
      REQUIRE(absl::SimpleAtoi(f[3], &offset));
      REQUIRE(absl::SimpleAtoi(f[4], &size));
      view.tables[f[1]][f[2]] = Field{offset, size};
    } else {
      FAIL("unexpected line: " << line);
    }
  }
  return view;
}

void CheckTable(const std::map<std::string, Field>& python, const std::map<std::string, Field>& cpp,
                const std::string& what) {
  REQUIRE_FALSE(python.empty());
  for (const auto& [name, field] : python) {
    INFO(what << "." << name);
    const auto it = cpp.find(name);
    REQUIRE(it != cpp.end());  // a field the C++ layout does not have
    CHECK(field.offset == it->second.offset);
    CHECK(field.size == it->second.size);
  }
}

std::string Hex(const char (&bytes)[8]) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    out += kDigits[(static_cast<unsigned char>(c) >> 4) & 0xf];
    out += kDigits[static_cast<unsigned char>(c) & 0xf];
  }
  return out;
}

// The constants both copies define, by their Python names, with the C++ values.
std::map<std::string, std::string> CppConstants(const std::string& magic_name) {
  namespace c = gpuprio::coordinator;
  return {
      {"LAYOUT_VERSION", std::to_string(c::kLayoutVersion)},
      {"READY_WORD", std::to_string(c::kReadyWord)},
      {"HEADER_BYTES", std::to_string(c::kHeaderBytes)},
      {"SLOT_BYTES", std::to_string(c::kSlotBytes)},
      {"SLOT_COUNT", std::to_string(c::kSlotCount)},
      {"SEGMENT_BYTES", std::to_string(c::kSegmentBytes)},
      {"NO_PRIORITY", std::to_string(c::kNoPriority)},
      {"DELAY_BUCKETS", std::to_string(c::kDelayBuckets)},
      {"SLOT_LIVE", std::to_string(c::kSlotLive)},
      {"LEVEL_ROWS", std::to_string(c::kLevelRows)},
      {"LEVEL_ROWS_OFFSET", std::to_string(offsetof(ProcessSlot, level_rows))},
      {"LEVEL_ROW_BYTES", std::to_string(sizeof(c::LevelRow))},
      {magic_name, Hex(c::kSegmentMagic)},
  };
}

void CheckConstants(const PythonView& view, const std::map<std::string, std::string>& cpp,
                    int at_least) {
  int compared = 0;
  for (const auto& [name, value] : cpp) {
    const auto it = view.consts.find(name);
    if (it == view.consts.end()) continue;
    INFO(name);
    CHECK(it->second == value);
    ++compared;
  }
  CHECK(compared >= at_least);
}

constexpr char kConstNames[] =
    "LAYOUT_VERSION,READY_WORD,HEADER_BYTES,SLOT_BYTES,SLOT_COUNT,SEGMENT_BYTES,NO_PRIORITY,"
    "DELAY_BUCKETS,SLOT_LIVE,SEGMENT_MAGIC,MAGIC,HISTOGRAM_OFFSET,LEVEL_LAST_SUBMIT_OFFSET,"
    "LEVEL_ROWS,LEVEL_ROWS_OFFSET,LEVEL_ROW_BYTES,LEVEL_ROW_HISTOGRAM_OFFSET";

TEST_CASE("The launcher reads the segment at the C++ layout's offsets", "[tools][coordinator]") {
  const PythonView view =
      Load("tools/cli/gpuprio_cli/segment_layout.py", kConstNames,
           "HEADER_FIELDS,SLOT_FIELDS,LEVEL_ROW_FIELDS");
  CheckTable(view.tables.at("HEADER_FIELDS"), HeaderFields(), "SegmentHeader");
  CheckTable(view.tables.at("SLOT_FIELDS"), SlotFields(), "ProcessSlot");
  CheckTable(view.tables.at("LEVEL_ROW_FIELDS"), LevelRowFields(), "LevelRow");
  CheckConstants(view, CppConstants("SEGMENT_MAGIC"), 12);
}

TEST_CASE("The tests' segment writer writes at the C++ layout's offsets", "[tools][coordinator]") {
  const PythonView view =
      Load("tests/tools/segment_writer.py", kConstNames, "HEADER,SLOT,LEVEL_ROW");
  CheckTable(view.tables.at("HEADER"), HeaderFields(), "SegmentHeader");
  CheckTable(view.tables.at("SLOT"), SlotFields(), "ProcessSlot");
  CheckTable(view.tables.at("LEVEL_ROW"), LevelRowFields(), "LevelRow");
  CheckConstants(view, CppConstants("MAGIC"), 12);
  CHECK(view.consts.at("LEVEL_ROW_HISTOGRAM_OFFSET") ==
        std::to_string(offsetof(gpuprio::coordinator::LevelRow, delay_histogram)));
  CHECK(view.consts.at("HISTOGRAM_OFFSET") ==
        std::to_string(offsetof(ProcessSlot, delay_histogram)));
  CHECK(view.consts.at("LEVEL_LAST_SUBMIT_OFFSET") ==
        std::to_string(offsetof(ProcessSlot, level_last_submit_unix_ns)));
}

}  // namespace
