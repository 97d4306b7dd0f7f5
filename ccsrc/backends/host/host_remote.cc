// HostBackend's remote peers (host_backend.h, "Several hosts"): the hosts' layout, opening the
// remote transport, starting it, losses passed on, and what debug_state() shows of the peers
// and the network.
#include <cstddef>
#include <string>
#include <vector>

#include "backends/host/host_backend.h"
#include "backends/transport/transport.h"

namespace hyper_parallel::shmem::host {

bool HostsLayout(const std::vector<SegmentHandle>& handles, int rank, std::string* layout,
                 std::string* others) {
  const HostIdentity& mine = handles[rank].host;
  // The PEs grouped by host, in order of their first PE.
  std::vector<std::pair<const HostIdentity*, std::vector<int>>> hosts;
  bool alone = true;
  for (int pe = 0; pe < static_cast<int>(handles.size()); ++pe) {
    const HostIdentity& host = handles[pe].host;
    if (!host.SameHost(mine)) alone = false;
    auto it = std::find_if(hosts.begin(), hosts.end(),
                           [&](const auto& entry) { return entry.first->SameHost(host); });
    if (it == hosts.end()) {
      hosts.push_back({&host, {pe}});
    } else {
      it->second.push_back(pe);
    }
  }
  for (const auto& [host, pes] : hosts) {
    std::string list;
    for (int pe : pes) list += (list.empty() ? "" : ",") + std::to_string(pe);
    *layout += (layout->empty() ? "" : "; ") + host->Label() + ": pes " + list;
    if (!host->SameHost(mine)) *others += (others->empty() ? "" : ",") + list;
  }
  return alone;
}

Status CheckOneHost(const std::vector<SegmentHandle>& handles, int rank, std::string_view reason) {
  std::string layout, others;
  if (HostsLayout(handles, rank, &layout, &others)) return Status::Ok();
  return Status::Assertion(
      ErrorCode::kUnsupportedCapability,
      "the host backend maps the memory of PEs on its own host only; PEs on other hosts need "
      "the network transport (UCX), which is not available: " + std::string(reason),
      {{"pe", std::to_string(rank)}, {"host", handles[rank].host.Label()},
       {"other_host_pes", others}, {"hosts", layout}});
}

HostBackend::~HostBackend() { DestroyHeap(); }

void HostBackend::Lost(int pe, Status status) {
  ControlBlock* own = PeerControl(spec_.rank);
  if (!status.ok()) {
    latch_.Set(std::move(status));
    Ring<CallSite::kHostThread>(&own->doorbell);
  }
  if (passed_on_[pe].exchange(true, std::memory_order_acq_rel)) return;
  transport_->ReportLost(pe);
  if (placement_[pe].route != PeerRoute::kRemote) return;  // this host's PEs watch its processes
  for (int peer = 0; peer < spec_.size; ++peer) {
    if (placement_[peer].route != PeerRoute::kMapped || peer == pe) continue;
    ControlBlock* control = PeerControl(peer);
    std::int32_t none = -1;
    control->told_lost.compare_exchange_strong(none, pe, std::memory_order_acq_rel);
    Ring<CallSite::kHostThread>(&control->doorbell);
  }
}

Status HostBackend::ConnectRemotes(const std::vector<SegmentHandle>& handles,
                                   const std::vector<bool>& remote,
                                   const std::vector<bool>& watched) {
  if (!spec_.all_gather) {
    return Status::Assertion(ErrorCode::kInvalidState,
                             "PEs on other hosts need a second exchange, and none was given", {});
  }
  // Every PE takes part in the exchange, also one that could not load UCX: then every PE
  // fails alike, naming those that could not.
  transport::TransportOptions options;
  options.kind = spec_.remote_transport;
  options.ucx_library = spec_.ucx_library;
  options.timeout = spec_.timeout;
  options.path = spec_.remote_path;
  Status loaded = transport::OpenRemoteTransport(options, &transport_);
  std::string blob;
  if (loaded.ok()) {
    RequireCallable<HostCall::kOpenPeerSegment, CallSite::kHostThread>();
    loaded = transport_->Register(mappings_[spec_.rank].base, segment_bytes_, &blob);
  }
  std::vector<std::string> blobs;
  HPS_RETURN_IF_ERROR(
      spec_.all_gather(loaded.ok() ? "K" + blob : "E" + loaded.message(), &blobs));
  std::string without;
  std::string reason;
  for (int pe = 0; pe < spec_.size; ++pe) {
    if (!blobs[pe].empty() && blobs[pe][0] == 'K') {
      blobs[pe].erase(0, 1);
      continue;
    }
    without += (without.empty() ? "" : ",") + std::to_string(pe) + " (" + handles[pe].host.Label() + ")";
    if (reason.empty()) reason = blobs[pe].empty() ? "unknown" : blobs[pe].substr(1);
  }
  if (!without.empty()) {
    transport_.reset();
    std::string layout, others;
    HostsLayout(handles, spec_.rank, &layout, &others);
    return Status::Assertion(ErrorCode::kUnsupportedCapability,
                             "PEs on other hosts (or HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all) need "
                             "the network transport (UCX), which some PEs could not load",
                             {{"pe", std::to_string(spec_.rank)}, {"pes_without_ucx", without},
                              {"hosts", layout}, {"reason", reason}});
  }
  return transport_->Connect(spec_.rank, blobs, remote, watched,
                             [this](int pe, const std::string& how) {
                               Lost(pe, Status::Assertion(
                                            ErrorCode::kPeerLost, "a remote peer PE was lost",
                                            {{"pe", std::to_string(pe)},
                                             {"host", placement_[pe].host},
                                             {"noticed", how}}));
                             });
}

Status HostBackend::StartRemotes(const std::vector<bool>& watched) {
  ControlBlock* own = PeerControl(spec_.rank);
  const ControlLayout layout(spec_.teams, spec_.size);
  RemoteTransport::Liveness liveness;
  liveness.silence = spec_.peer_silence;
  const std::uint64_t control = heap_region_bytes_;
  const int rank = spec_.rank;
  liveness.remote_beat_offset = [own, layout, control, rank](int) {
    return control + ControlLayout::OffsetIn(own, &layout.Beat(own, rank));
  };
  liveness.observed_beat = [own, layout](int pe) {
    return layout.Beat(own, pe).value.load(std::memory_order_acquire);
  };
  HPS_RETURN_IF_ERROR(
      transport_->Start(std::move(liveness), latch_.flag(), &own->doorbell, wait_policy_));
  // Every watched peer is reachable and its segment is what we expect: read its control
  // block's head (a round trip; its progress thread answers). The other remote peers are
  // reached when first used.
  for (int pe = 0; pe < spec_.size; ++pe) {
    if (!watched[pe]) continue;
    struct {
      std::uint64_t magic;
      std::uint32_t version;
      std::int32_t rank;
    } head{};
    static_assert(offsetof(ControlBlock, magic) == 0 && offsetof(ControlBlock, rank) == 12);
    Status read = transport_->Get(pe, &head, control, sizeof head);
    if (!read.ok()) {
      return Status::Assertion(ErrorCode::kBackendError,
                               "a remote peer could not be reached through UCX",
                               {{"pe", std::to_string(pe)}, {"host", placement_[pe].host},
                                {"reason", read.message()}});
    }
    if (head.magic != kControlMagic || head.version != kControlVersion || head.rank != pe) {
      return Status::Assertion(ErrorCode::kBackendError, "remote peer control block is not valid",
                               {{"pe", std::to_string(pe)}, {"magic", Hex(head.magic)},
                                {"version", std::to_string(head.version)}});
    }
  }
  return Status::Ok();
}

std::vector<PeerPlacement> HostBackend::Placement() const {
  std::vector<PeerPlacement> placement = placement_;
  const std::string remote_name = transport_ ? transport_->name() : "";
  for (std::size_t pe = 0; pe < placement.size(); ++pe) {
    switch (placement[pe].route) {
      case PeerRoute::kSelf:
        placement[pe].transport = "self";
        break;
      case PeerRoute::kMapped:
        placement[pe].transport = "shared memory";
        break;
      case PeerRoute::kRemote:
        placement[pe].transport = remote_name;
        // The path is chosen when the endpoint is made ("not connected" before).
        if (transport_) placement[pe].path = transport_->PathName(static_cast<int>(pe));
        break;
    }
  }
  return placement;
}

NetworkInfo HostBackend::Network() const {
  NetworkInfo info;
  if (!transport_) return info;
  info.provider = transport_->name();
  info.version = transport_->version();
  info.endpoints = transport_->endpoints();
  transport_->counters().ForEach([&info](std::string_view name, std::uint64_t value) {
    info.counters.emplace_back(std::string(name), value);
  });
  return info;
}

}  // namespace hyper_parallel::shmem::host
