// UcxTransport's liveness (ucx_transport.h, "Liveness"): heartbeats and the silence that loses
// a peer, endpoint errors, losses passed on, farewells.
#include <string>

#include "backends/transport/ucx/paths.h"

namespace hyper_parallel::shmem::transport {

#if HPS_HAVE_UCX_HEADERS

void UcxTransport::Heartbeat(std::chrono::steady_clock::time_point now) {
  if (!liveness_.remote_beat_offset || !liveness_.observed_beat) return;
  for (Peer& peer : peers_) {
    // The watched peers only: a loss the others notice reaches this PE as a kLost.
    if (!peer.watched || failed_[peer.pe].load(std::memory_order_acquire)) continue;
    if (Departed(peer.pe)) continue;
    // Never waited for: a silent host must not hold up the beats to the others.
    const RemoteSignal beat{liveness_.remote_beat_offset(peer.pe), 8, SignalAction::kAdd, 1};
    if (peer.path != nullptr) peer.path->Beat(*this, peer, beat);
    const std::uint64_t observed = liveness_.observed_beat(peer.pe);
    if (observed != peer.last_beat) {
      peer.last_beat = observed;
      peer.last_change = now;
    } else if (now - peer.last_change > liveness_.silence) {
      failed_[peer.pe].store(true, std::memory_order_release);
      if (lost_) {
        lost_(peer.pe, "no heartbeat from its host for " +
                           std::to_string(liveness_.silence.count()) +
                           " ms (HYPER_PARALLEL_SHMEM_PEER_SILENCE_MS)");
      }
    }
  }
}

void UcxTransport::OnEndpointError(void* arg, void* /*ep*/, int status) {
  auto* peer = static_cast<Peer*>(arg);
  UcxTransport* self = peer->owner;
  self->failed_[peer->pe].store(true, std::memory_order_release);
  // Whoever waits on this PE's doorbell looks again (and finds the loss).
  if (self->own_bell_ != nullptr) Ring<CallSite::kHostThread>(self->own_bell_);
  // A peer that said farewell closed normally (its connections go with it): not a loss.
  if (self->Departed(peer->pe)) return;
  if (self->lost_ && !self->stopping_.load(std::memory_order_acquire)) {
    self->lost_(peer->pe, "its UCX endpoint reported " +
                              UcxStatusText(static_cast<ucs_status_t>(status),
                                            self->lib_->status_string));
  }
}

void UcxTransport::ReportLost(int pe) {
  if (peers_.empty()) return;
  WireHeader header;
  header.kind = WireKind::kLost;
  header.source = rank_;
  header.value = pe;
  for (const Peer& peer : peers_) {
    if (!peer.watched || peer.pe == pe) continue;
    Post(peer.pe, header, nullptr, 0, /*heartbeat=*/true);
  }
}

bool UcxTransport::Departed(int pe) const {
  return liveness_.observed_beat && liveness_.observed_beat(pe) == kFarewell;
}

#endif

}  // namespace hyper_parallel::shmem::transport
