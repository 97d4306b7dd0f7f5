#include "base/config.h"

#include <cstdlib>

namespace hyper_parallel::shmem {
namespace {

std::string Quoted(std::string_view text) {
  std::string quoted = "\"";
  quoted.append(text).append("\"");
  return quoted;
}

}  // namespace

Status InvalidConfig(std::string_view name, std::string_view rule, std::string_view text) {
  std::string what(name);
  return Status::Contract(ErrorCode::kInvalidConfig, what, rule, Quoted(text))
      .At("config", "parse");
}

std::string_view LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kError: return "ERROR";
  }
  return "UNKNOWN";
}

EnvLookup ProcessEnvironment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

Status ParsePositiveDecimal(std::string_view name, std::string_view text, std::uint64_t max,
                            std::uint64_t* out) {
  const std::string rule = "a positive decimal integer no greater than " + std::to_string(max) +
                           " (digits only, no sign, blanks or leading zeros)";
  if (text.empty() || text.front() == '0') return InvalidConfig(name, rule, text);
  std::uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return InvalidConfig(name, rule, text);
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    // digit > max first: (max - digit) would wrap for a max below 9.
    if (digit > max || value > (max - digit) / 10) return InvalidConfig(name, rule, text);
    value = value * 10 + digit;
  }
  *out = value;
  return Status::Ok();
}

Status Config::FromEnvironment(const EnvLookup& env, Config* out) {
  Config config;
  if (auto text = env(kEnvHeapSize)) {
    HPS_RETURN_IF_ERROR(ParsePositiveDecimal(kEnvHeapSize, *text, kMaxHeapBytes,
                                             &config.heap_bytes));
  }
  if (auto text = env(kEnvTimeoutSec)) {
    HPS_RETURN_IF_ERROR(ParsePositiveDecimal(kEnvTimeoutSec, *text, kMaxTimeoutSec,
                                             &config.timeout_sec));
  }
  if (auto text = env(kEnvLogLevel)) {
    if (*text == "0") {
      config.log_level = LogLevel::kDebug;
    } else if (*text == "1") {
      config.log_level = LogLevel::kInfo;
    } else if (*text == "2") {
      config.log_level = LogLevel::kError;
    } else {
      return InvalidConfig(kEnvLogLevel, "one of 0 (debug), 1 (info), 2 (error)", *text);
    }
  }
  if (auto text = env(kEnvBackend)) config.backend = *text;  // checked by the registry
  if (auto text = env(kEnvCopyWorkers)) {
    HPS_RETURN_IF_ERROR(ParsePositiveDecimal(kEnvCopyWorkers, *text, kMaxCopyWorkers,
                                             &config.copy_workers));
  }
  if (auto text = env(kEnvWait)) config.wait = *text;  // checked by the host backend
  if (auto text = env(kEnvQuarantineBytes)) {
    std::uint64_t bytes = 0;
    if (*text != "0") {
      HPS_RETURN_IF_ERROR(ParsePositiveDecimal(kEnvQuarantineBytes, *text, kMaxHeapBytes, &bytes));
    }
    config.quarantine_bytes = bytes;
  }
  if (auto text = env(kEnvMaxTeams)) {
    HPS_RETURN_IF_ERROR(ParsePositiveDecimal(kEnvMaxTeams, *text, kMaxMaxTeams, &config.max_teams));
  }
  if (auto text = env(kEnvReduceWorkspace)) {
    std::uint64_t bytes = 0;
    HPS_RETURN_IF_ERROR(
        ParsePositiveDecimal(kEnvReduceWorkspace, *text, Config::kMaxReduceWorkspace, &bytes));
    if (bytes < Config::kMinReduceWorkspace || bytes % 4096 != 0) {
      return InvalidConfig(kEnvReduceWorkspace, "a multiple of 4096 from 4096 to 2^30", *text);
    }
    config.reduce_workspace = bytes;
  }
  if (auto text = env(kEnvMaxPes)) {
    HPS_RETURN_IF_ERROR(ParsePositiveDecimal(kEnvMaxPes, *text, kMaxMaxPes, &config.max_pes));
  }
  if (auto text = env(kEnvRemotePeers)) {
    if (*text != "other-hosts" && *text != "all" && !RemotePeerBlock(*text)) {
      return InvalidConfig(kEnvRemotePeers, "one of other-hosts, all, blocks:K (K a positive decimal)",
                           *text);
    }
    config.remote_peers = *text;
  }
  if (auto text = env(kEnvUcxLibrary)) config.ucx_library = *text;
  if (auto text = env(kEnvRemotePath)) {
    if (*text != "auto" && *text != "messages" && *text != "rma") {
      return InvalidConfig(kEnvRemotePath, "one of auto, messages, rma", *text);
    }
    config.remote_path = *text;
  }
  if (auto text = env(kEnvRemoteTransport)) {
    if (*text != "ucx" && *text != "reordering") {
      return InvalidConfig(kEnvRemoteTransport, "one of ucx, reordering", *text);
    }
    config.remote_transport = *text;
  }
  if (auto text = env(kEnvPeerSilenceMs)) {
    HPS_RETURN_IF_ERROR(ParsePositiveDecimal(kEnvPeerSilenceMs, *text, kMaxPeerSilenceMs,
                                             &config.peer_silence_ms));
  }
  if (auto text = env(kEnvAlgorithms)) {
    HPS_RETURN_IF_ERROR(ParseAlgorithms(*text, &config.algorithms));
  }
  *out = config;
  return Status::Ok();
}

std::optional<std::uint64_t> RemotePeerBlock(std::string_view setting) {
  constexpr std::string_view kPrefix = "blocks:";
  if (!setting.starts_with(kPrefix)) return std::nullopt;
  std::uint64_t block = 0;
  if (!ParsePositiveDecimal(kEnvRemotePeers, setting.substr(kPrefix.size()), Config::kMaxMaxPes,
                            &block)
           .ok()) {
    return std::nullopt;
  }
  return block;
}

Status ParseAlgorithms(std::string_view text,
                       std::vector<std::pair<std::string, std::string>>* out) {
  const auto is_name = [](std::string_view name) {
    if (name.empty()) return false;
    for (char c : name) {
      if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) return false;
    }
    return true;
  };
  std::vector<std::pair<std::string, std::string>> pairs;
  std::size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string_view item = text.substr(start, comma - start);
    const std::size_t equals = item.find('=');
    const std::string_view name = item.substr(0, equals);
    const std::string_view algorithm =
        equals == std::string_view::npos ? std::string_view() : item.substr(equals + 1);
    if (!is_name(name) || !is_name(algorithm)) {
      return InvalidConfig(kEnvAlgorithms,
                           "comma-separated collective=algorithm pairs (lower-case names)", text);
    }
    for (const auto& [seen, unused] : pairs) {
      if (seen == name) {
        return InvalidConfig(kEnvAlgorithms, "each collective named once", text);
      }
    }
    pairs.emplace_back(std::string(name), std::string(algorithm));
    start = comma + 1;
  }
  *out = std::move(pairs);
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem
