// Fuzz harness for configuration parsing: Config::FromEnvironment and ParsePositiveDecimal
// against an independent reference parser, and the backends' checks of their own settings
// (the backend's name, the host backend's wait setting) against the backends' own tables.
//
// Input layout, chosen so that seeds are mostly readable text:
//   byte 0        which variables are set: bit i for kVariables[i] (all eight bits), so
//                 '@' sets the seventh only and '_' the first five and the seventh
//   the rest      fields separated by NUL (an environment value cannot hold one): field i is
//                 the value of kVariables[i] when its bit is set; field 8, when present, is
//                 up to 8 little-endian bytes of an extra `max` for ParsePositiveDecimal
// Fields 0-5 are also fed to ParsePositiveDecimal directly, set or not, under the production
// limits, the edges of uint64 and the extra max.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "backends/backend_kind.h"
#include "backends/wait/wait_policy.h"
#include "base/config.h"
#include "base/status.h"

namespace hyper_parallel::shmem {
namespace {

constexpr std::array<std::string_view, 8> kVariables = {
    kEnvHeapSize, kEnvTimeoutSec, kEnvLogLevel, kEnvBackend, kEnvCopyWorkers, kEnvWait,
    kEnvQuarantineBytes, kEnvMaxTeams};

// Read by Config but not fuzzed here (the input format has one bit per variable above): the
// scale-out settings (docs/scale-out.md) and the reductions' workspace, always unset in this
// harness; their parsing has unit tests of its own.
constexpr std::array<std::string_view, 8> kUnfuzzed = {
    kEnvRemotePeers,     kEnvUcxLibrary, kEnvPeerSilenceMs, kEnvRemotePath,     kEnvRemoteTransport,
    kEnvMaxPes,          kEnvAlgorithms, kEnvReduceWorkspace};

struct FuzzEnvironment {
  std::array<std::optional<std::string>, kVariables.size()> values;
  std::vector<std::string> fields;  // every NUL-separated field, set or not
  std::optional<std::uint64_t> extra_max;
};

FuzzEnvironment Decode(const std::uint8_t* data, std::size_t size) {
  FuzzEnvironment env;
  if (size == 0) return env;
  const unsigned mask = data[0];
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  std::size_t begin = 0;
  while (begin <= rest.size()) {
    std::size_t end = rest.find('\0', begin);
    if (end == std::string_view::npos) end = rest.size();
    env.fields.emplace_back(rest.substr(begin, end - begin));
    begin = end + 1;
  }
  for (std::size_t i = 0; i < kVariables.size(); ++i) {
    if ((mask >> i) & 1u) env.values[i] = i < env.fields.size() ? env.fields[i] : "";
  }
  if (env.fields.size() > kVariables.size()) {
    const std::string& raw = env.fields[kVariables.size()];
    std::uint64_t max = 0;
    for (std::size_t i = 0; i < raw.size() && i < 8; ++i) {
      max |= static_cast<std::uint64_t>(static_cast<unsigned char>(raw[i])) << (8 * i);
    }
    env.extra_max = max;
  }
  return env;
}

// The rules of config.h, written out again without looking at how config.cc loops: a value
// is a whole string of ASCII digits, no leading zero, and as a number in [1, max].
std::optional<std::uint64_t> ReferencePositiveDecimal(std::string_view text, std::uint64_t max) {
  if (text.empty() || text.size() > 20 || text.front() == '0') return std::nullopt;
  unsigned __int128 value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value < 1 || value > max) return std::nullopt;
  return static_cast<std::uint64_t>(value);
}

std::optional<LogLevel> ReferenceLogLevel(std::string_view text) {
  if (text == "0") return LogLevel::kDebug;
  if (text == "1") return LogLevel::kInfo;
  if (text == "2") return LogLevel::kError;
  return std::nullopt;
}

// The backends' own tables are the reference for their names (backends/backend_kind.h,
// backends/wait/wait_policy.h): the harness checks that parsing agrees with them and
// round-trips, without restating the names.
std::optional<BackendKind> ReferenceBackend(std::string_view text) {
  for (const auto& [kind, name] : kBackendNames) {
    if (name == text) return kind;
  }
  return std::nullopt;
}

std::optional<WaitMode> ReferenceWait(std::string_view text) {
  for (WaitMode mode : {WaitMode::kAuto, WaitMode::kSpin, WaitMode::kBlock}) {
    if (WaitModeName(mode) == text) return mode;
  }
  return std::nullopt;
}

std::string Show(std::string_view text) {
  std::string shown = "\"";
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"') {
      shown += static_cast<char>(c);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      shown += escaped;
    }
  }
  return shown + "\"";
}

// A failed parse must be INVALID_CONFIG in the contract shape of status.h, naming the
// variable and quoting the bad value, so a user can find what to fix.
void CheckRejection(const Status& status, std::string_view name, std::string_view text) {
  HPS_FUZZ_CHECK(status.code() == ErrorCode::kInvalidConfig,
                 "code " + std::string(ErrorCodeName(status.code())) + " for " +
                     std::string(name) + "=" + Show(text));
  const std::string& message = status.message();
  const std::string head = std::string(name) + " must be ";
  const std::string tail = ", but got \"" + std::string(text) + "\"";
  HPS_FUZZ_CHECK(message.size() > head.size() + tail.size() && message.starts_with(head) &&
                     message.ends_with(tail),
                 "message " + Show(message) + " is not \"" + std::string(name) +
                     " must be <rule>, but got \\\"<value>\\\"\" for value " + Show(text));
  HPS_FUZZ_CHECK(status.operation() == "config" && status.phase() == "parse",
                 "tagged " + status.operation() + "/" + status.phase());
  HPS_FUZZ_CHECK(status.ToString().find("error_code=INVALID_CONFIG ") != std::string::npos,
                 status.ToString());
}

void CheckParsePositiveDecimal(std::string_view text, std::uint64_t max) {
  constexpr std::uint64_t kUntouched = 0x5eed5eed5eed5eedull;
  std::uint64_t value = kUntouched;
  const Status status = ParsePositiveDecimal("FUZZ_VALUE", text, max, &value);
  const std::optional<std::uint64_t> expected = ReferencePositiveDecimal(text, max);
  // Built only for a failure message: string building dominates a run otherwise.
  auto context = [&] {
    return "ParsePositiveDecimal(" + Show(text) + ", max=" + std::to_string(max) + ")";
  };
  if (expected) {
    HPS_FUZZ_CHECK(status.ok(), context() + " rejected a valid value: " + status.message());
    HPS_FUZZ_CHECK(value == *expected, context() + " gave " + std::to_string(value) +
                                           ", expected " + std::to_string(*expected));
    return;
  }
  HPS_FUZZ_CHECK(!status.ok(), context() + " accepted an invalid value as " +
                                   std::to_string(value));
  HPS_FUZZ_CHECK(value == kUntouched, context() + " wrote its output on failure");
  CheckRejection(status, "FUZZ_VALUE", text);
  // The rule must tell the user the limit.
  HPS_FUZZ_CHECK(status.message().find(std::to_string(max)) != std::string::npos,
                 context() + " message does not name the limit: " + status.message());
}

// What Config::FromEnvironment must produce: the config on success, else the indices of the
// variables that are invalid (which of them is reported first is not part of the contract).
struct ReferenceOutcome {
  std::optional<Config> config;
  std::vector<std::size_t> invalid;
};

ReferenceOutcome ReferenceConfig(const FuzzEnvironment& env) {
  Config config;  // the documented defaults
  ReferenceOutcome outcome;
  const auto& v = env.values;
  auto decimal = [&](std::size_t i, std::uint64_t max, std::uint64_t* field) {
    if (!v[i]) return;
    if (auto parsed = ReferencePositiveDecimal(*v[i], max)) {
      *field = *parsed;
    } else {
      outcome.invalid.push_back(i);
    }
  };
  decimal(0, Config::kMaxHeapBytes, &config.heap_bytes);
  decimal(1, Config::kMaxTimeoutSec, &config.timeout_sec);
  if (v[2]) {
    if (auto level = ReferenceLogLevel(*v[2])) {
      config.log_level = *level;
    } else {
      outcome.invalid.push_back(2);
    }
  }
  if (v[3]) config.backend = *v[3];  // kept as given; the registry checks it
  decimal(4, Config::kMaxCopyWorkers, &config.copy_workers);
  if (v[5]) config.wait = *v[5];  // kept as given; the host backend checks it
  if (v[6]) {  // 0 (off) or a positive decimal up to the largest heap
    if (*v[6] == "0") {
      config.quarantine_bytes = 0;
    } else if (auto parsed = ReferencePositiveDecimal(*v[6], Config::kMaxHeapBytes)) {
      config.quarantine_bytes = *parsed;
    } else {
      outcome.invalid.push_back(6);
    }
  }
  decimal(7, Config::kMaxMaxTeams, &config.max_teams);
  if (outcome.invalid.empty()) outcome.config = config;
  return outcome;
}

void CheckConfigRanges(const Config& config) {
  HPS_FUZZ_CHECK(config.heap_bytes >= 1 && config.heap_bytes <= Config::kMaxHeapBytes,
                 "heap_bytes " + std::to_string(config.heap_bytes));
  HPS_FUZZ_CHECK(config.timeout_sec >= 1 && config.timeout_sec <= Config::kMaxTimeoutSec,
                 "timeout_sec " + std::to_string(config.timeout_sec));
  HPS_FUZZ_CHECK(config.timeout().count() / 1000 ==
                     static_cast<std::int64_t>(config.timeout_sec),
                 "timeout() overflowed for " + std::to_string(config.timeout_sec));
  HPS_FUZZ_CHECK(config.copy_workers <= Config::kMaxCopyWorkers,
                 "copy_workers " + std::to_string(config.copy_workers));
  HPS_FUZZ_CHECK(LogLevelName(config.log_level) != "UNKNOWN", "log level out of the enum");
  HPS_FUZZ_CHECK(config.max_teams >= 1 && config.max_teams <= Config::kMaxMaxTeams,
                 "max_teams " + std::to_string(config.max_teams));
}

struct Parsed {
  Status status;
  Config config;
  std::array<int, kVariables.size()> lookups{};
};

Parsed ParseOnce(const FuzzEnvironment& env, const Config& initial) {
  Parsed parsed;
  parsed.config = initial;
  const EnvLookup lookup = [&](std::string_view name) -> std::optional<std::string> {
    for (std::size_t i = 0; i < kVariables.size(); ++i) {
      if (name == kVariables[i]) {
        ++parsed.lookups[i];
        return env.values[i];
      }
    }
    for (std::string_view unfuzzed : kUnfuzzed) {
      if (name == unfuzzed) return std::nullopt;
    }
    HPS_FUZZ_CHECK(false, "looked up an undocumented variable " + Show(name));
    return std::nullopt;
  };
  parsed.status = Config::FromEnvironment(lookup, &parsed.config);
  return parsed;
}

void CheckFromEnvironment(const FuzzEnvironment& env) {
  // Differs from the defaults in every field, so a partial write on failure shows.
  Config sentinel;
  sentinel.heap_bytes = 4242;
  sentinel.timeout_sec = 17;
  sentinel.log_level = LogLevel::kInfo;
  sentinel.backend = "sentinel-backend";
  sentinel.copy_workers = 63;
  sentinel.wait = "sentinel-wait";
  sentinel.quarantine_bytes = 99;
  sentinel.max_teams = 7;

  const Parsed first = ParseOnce(env, sentinel);
  const Parsed second = ParseOnce(env, sentinel);
  HPS_FUZZ_CHECK(first.status == second.status && first.config == second.config,
                 "parsing is not deterministic: " + first.status.ToString() + " vs " +
                     second.status.ToString());

  const ReferenceOutcome expected = ReferenceConfig(env);
  if (expected.config) {
    HPS_FUZZ_CHECK(first.status.ok(), "rejected a valid environment: " + first.status.ToString());
    const Config& got = first.config;
    const Config& want = *expected.config;
    HPS_FUZZ_CHECK(got.heap_bytes == want.heap_bytes,
                   "heap_bytes " + std::to_string(got.heap_bytes) + ", expected " +
                       std::to_string(want.heap_bytes));
    HPS_FUZZ_CHECK(got.timeout_sec == want.timeout_sec,
                   "timeout_sec " + std::to_string(got.timeout_sec) + ", expected " +
                       std::to_string(want.timeout_sec));
    HPS_FUZZ_CHECK(got.log_level == want.log_level,
                   "log_level " + std::string(LogLevelName(got.log_level)));
    HPS_FUZZ_CHECK(got.backend == want.backend,
                   "backend " + Show(got.backend));
    HPS_FUZZ_CHECK(got.copy_workers == want.copy_workers,
                   "copy_workers " + std::to_string(got.copy_workers) + ", expected " +
                       std::to_string(want.copy_workers));
    HPS_FUZZ_CHECK(got.wait == want.wait, "wait " + Show(got.wait));
    HPS_FUZZ_CHECK(got.quarantine_bytes == want.quarantine_bytes,
                   "quarantine_bytes " + std::to_string(got.quarantine()) + ", expected " +
                       std::to_string(want.quarantine()));
    HPS_FUZZ_CHECK(got.max_teams == want.max_teams,
                   "max_teams " + std::to_string(got.max_teams) + ", expected " +
                       std::to_string(want.max_teams));
    HPS_FUZZ_CHECK(got == want, "Config::operator== disagrees with the fields");
    CheckConfigRanges(got);
    for (std::size_t i = 0; i < kVariables.size(); ++i) {
      HPS_FUZZ_CHECK(first.lookups[i] == 1, std::string(kVariables[i]) + " looked up " +
                                                std::to_string(first.lookups[i]) + " times");
    }
    return;
  }

  HPS_FUZZ_CHECK(!first.status.ok(), "accepted an invalid value of " +
                                         std::string(kVariables[expected.invalid.front()]) +
                                         ": " + Show(*env.values[expected.invalid.front()]));
  HPS_FUZZ_CHECK(first.config == sentinel, "wrote its output on failure");
  const std::string& message = first.status.message();
  std::optional<std::size_t> reported;
  for (std::size_t i : expected.invalid) {
    if (message.starts_with(std::string(kVariables[i]) + " ")) reported = i;
  }
  HPS_FUZZ_CHECK(reported.has_value(), "message names no invalid variable: " + Show(message));
  HPS_FUZZ_CHECK(first.lookups[*reported] == 1, "reported a variable it did not read");
  CheckRejection(first.status, kVariables[*reported], *env.values[*reported]);
}

// The backend's name and the host backend's wait setting, as the backends check them.
void CheckBackendSettings(const FuzzEnvironment& env) {
  if (env.values[3]) {
    const std::string& text = *env.values[3];
    BackendKind kind = BackendKind::kHost;
    const Status status = ParseBackendKind(text, &kind);
    if (const std::optional<BackendKind> want = ReferenceBackend(text)) {
      HPS_FUZZ_CHECK(status.ok() && kind == *want && BackendKindName(kind) == text,
                     "backend name does not round-trip: " + Show(text));
    } else {
      HPS_FUZZ_CHECK(kind == BackendKind::kHost, "wrote its output on failure");
      CheckRejection(status, kEnvBackend, text);
    }
  }
  if (env.values[5]) {
    const std::string& text = *env.values[5];
    WaitMode mode = WaitMode::kBlock;
    const Status status = ParseWaitMode(text, &mode);
    if (const std::optional<WaitMode> want = ReferenceWait(text)) {
      HPS_FUZZ_CHECK(status.ok() && mode == *want && WaitModeName(mode) == text,
                     "wait mode does not round-trip: " + Show(text));
    } else {
      HPS_FUZZ_CHECK(mode == WaitMode::kBlock, "wrote its output on failure");
      CheckRejection(status, kEnvWait, text);
    }
  }
}

}  // namespace
}  // namespace hyper_parallel::shmem

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace hyper_parallel::shmem;
  const FuzzEnvironment env = Decode(data, size);
  CheckFromEnvironment(env);
  CheckBackendSettings(env);

  // The limits config.cc uses, the edges of uint64, and one from the input (any value,
  // including 0 and maxima below one digit).
  std::vector<std::uint64_t> maxima = {9, 10, Config::kMaxCopyWorkers, Config::kMaxTimeoutSec,
                                       Config::kMaxHeapBytes, UINT64_MAX - 1, UINT64_MAX};
  if (env.extra_max) maxima.push_back(*env.extra_max);
  for (std::size_t i = 0; i < env.fields.size() && i < kVariables.size(); ++i) {
    for (std::uint64_t max : maxima) CheckParsePositiveDecimal(env.fields[i], max);
  }
  return 0;
}
