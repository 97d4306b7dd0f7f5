// HostDevice's agreements (host_device.h): the descriptor exchange of a collective on one host
// and across hosts through the hosts' leaders (docs/architecture.md, "Agreement across hosts"),
// and the members-only exchange. Included by host_device.h only, after the class.
#pragma once

#include <string>
#include <vector>

#include "backends/host/host_device.h"

namespace hyper_parallel::shmem::host {

template <CallSite kSite>
Status HostDevice::ExchangeAndMatch(const data_plane::CollectiveGroup& group,
                                  const CollectiveDescriptor& mine, std::string_view operation,
                                  const HostStream* stream) const {
  if (Spans(group)) {
    DescriptorSummary summary;
    HPS_RETURN_IF_ERROR(AgreeAcrossHosts<kSite>(group, mine, operation, stream, &summary));
    return summary.Conclude(group).verdict;
  }
  HPS_RETURN_IF_ERROR(Publish<kSite>(group, mine, operation, stream));
  if (mine.DecidedByCoreWords() && CoreWordsMatch(group, mine)) return Status::Ok();
  std::vector<CollectiveDescriptor> all;
  HPS_RETURN_IF_ERROR(ReadDescriptors(group, mine.sequence, &all));
  return MatchDescriptors(mine, all, &group);
}

template <CallSite kSite>
Status HostDevice::Agree(const data_plane::CollectiveGroup& group, const CollectiveDescriptor& mine,
                       std::string_view operation, const HostStream* stream,
                       Agreement* agreement) const {
  if (Spans(group)) {
    DescriptorSummary summary;
    HPS_RETURN_IF_ERROR(AgreeAcrossHosts<kSite>(group, mine, operation, stream, &summary));
    *agreement = summary.Conclude(group);
    return Status::Ok();
  }
  HPS_RETURN_IF_ERROR(Publish<kSite>(group, mine, operation, stream));
  std::vector<CollectiveDescriptor> all;
  HPS_RETURN_IF_ERROR(ReadDescriptors(group, mine.sequence, &all));
  *agreement = Agreement::FromAll(mine, all, &group);
  return Status::Ok();
}

template <CallSite kSite>
Status HostDevice::Publish(const data_plane::CollectiveGroup& group, const CollectiveDescriptor& mine,
                         std::string_view operation, const HostStream* stream) const {
  RequireCallable<HostCall::kExchange, kSite>();
  const std::uint64_t sequence = mine.sequence;
  const int team = group.sync_slot;
  StoreOwn<kSite>(group, mine);
  auto everyone = [&] {
    for (int member = 0; member < group.size(); ++member) {
      if (PublishedSequence(group.pe(member), team, sequence) < sequence) return false;
    }
    return true;
  };
  auto notice = [&] {
    return Register(operation, stream, [this, group, mine] {
      return (group.sync_slot == 0 ? std::string() : GroupLabel(group) + ", ") +
             "collective=" + mine.Describe() +
             ", missing_pes=" + MissingExchange(group, mine.sequence);
    });
  };
  const WaitOutcome outcome = Await<kSite>(everyone, notice);
  if (outcome == WaitOutcome::kAborted) return latch_->Get();
  if (outcome == WaitOutcome::kTimedOut) return Latched(ExchangeTimeout(group, mine));
  return Status::Ok();
}

template <CallSite kSite>
Status HostDevice::AgreeAcrossHosts(const data_plane::CollectiveGroup& group,
                                  const CollectiveDescriptor& mine, std::string_view operation,
                                  const HostStream* stream, DescriptorSummary* summary) const {
  RequireCallable<HostCall::kExchange, kSite>();
  const int team = group.sync_slot;
  const std::uint64_t sequence = mine.sequence;
  // Every earlier write of this PE lands before any PE passes. In a world of two PEs (on two
  // hosts) the one other PE is the only target and this PE's round message to it lands after
  // every earlier write to it (messages in order; a fence on the rma path): no flush needed.
  if (size_ > 2) Check<kSite>(access_.transport()->Flush());
  StoreOwn<kSite>(group, mine);
  std::vector<int> local;    // this host's members, world PEs in group order
  std::vector<int> leaders;  // the first member of every host, in group order
  int my_leader = -1;
  std::unordered_set<int> seen;  // hosts with a leader
  for (int member = 0; member < group.size(); ++member) {
    const int pe = group.pe(member);
    const int host = hosts_[pe];
    if (host == hosts_[rank_]) local.push_back(pe);
    if (!seen.insert(host).second) continue;
    if (host == hosts_[rank_]) my_leader = static_cast<int>(leaders.size());
    leaders.push_back(pe);
  }
  const auto describe = [group, mine] {
    return (group.sync_slot == 0 ? std::string() : GroupLabel(group) + ", ") +
           "collective=" + mine.Describe();
  };
  if (local.front() != rank_) {  // a member: the leader's verdict
    const int leader = local.front();
    const SummarySlot& verdict = layout_.Verdict(access_.control(leader), team, sequence);
    HPS_RETURN_IF_ERROR(AwaitSlot<kSite>(verdict, sequence, operation, stream, describe,
                                         leader, "the host leader's verdict"));
    return ReadSummary(verdict, sequence, group, leader, summary);
  }
  // The leader: its host's members, then the rounds among the leaders.
  auto everyone = [&] {
    for (int pe : local) {
      if (PublishedSequence(pe, team, sequence) < sequence) return false;
    }
    return true;
  };
  auto notice = [&] {
    return Register(operation, stream, [this, group, mine, describe] {
      return describe() + ", missing_pes=" + MissingExchange(group, mine.sequence);
    });
  };
  const WaitOutcome outcome = Await<kSite>(everyone, notice);
  if (outcome == WaitOutcome::kAborted) return latch_->Get();
  if (outcome == WaitOutcome::kTimedOut) return Latched(ExchangeTimeout(group, mine));
  *summary = DescriptorSummary(sequence);
  for (int pe : local) {
    CollectiveDescriptor theirs;
    HPS_RETURN_IF_ERROR(ReadOwn(pe, group, sequence, &theirs));
    summary->Fold(theirs, pe);
  }
  const int hosts = static_cast<int>(leaders.size());
  for (int round = 0; (1 << round) < hosts; ++round) {
    const int to = leaders[static_cast<std::size_t>((my_leader + (1 << round)) % hosts)];
    const int from =
        leaders[static_cast<std::size_t>(((my_leader - (1 << round)) % hosts + hosts) % hosts)];
    SendSummary<kSite>(to, team, round, *summary);
    const SummarySlot& slot = layout_.Round(access_.control(rank_), team, round, sequence);
    HPS_RETURN_IF_ERROR(AwaitSlot<kSite>(slot, sequence, operation, stream, describe, from,
                                         "round " + std::to_string(round) + " of " +
                                             std::to_string(DisseminationRounds(
                                                 static_cast<std::uint64_t>(hosts)))));
    DescriptorSummary received;
    HPS_RETURN_IF_ERROR(ReadSummary(slot, sequence, group, from, &received));
    summary->Combine(received);
  }
  SummarySlot& verdict = layout_.Verdict(access_.control(rank_), team, sequence);
  StoreSummary(verdict, *summary);
  for (int pe : local) {
    if (pe != rank_) Ring<kSite>(&access_.control(pe)->doorbell);
  }
  return Status::Ok();
}

template <CallSite kSite>
Status HostDevice::ExchangeWithPeers(std::span<const PeerRound> peers, const ExchangeWords& mine,
                                   std::string_view operation, std::vector<ExchangeWords>* theirs) const {
  RequireCallable<HostCall::kExchange, kSite>();
  for (const PeerRound& peer : peers) {
    if (IsRemote(peer.pe)) {
      // Into the peer's mailbox through UCX: the words, then the round (after them; one
      // message on the messages path).
      const CollectiveSlot& box = layout_.Offer(access_.control(rank_), rank_, peer.round);
      Check<kSite>(access_.transport()->PutSignal(
          peer.pe, RemoteOffset(&box.words[0]), &mine[1],
          (CollectiveDescriptor::kWords - 1) * sizeof(std::uint64_t),
          RemoteSignal{RemoteOffset(&box.sequence), 8, SignalAction::kSet,
                       static_cast<std::int64_t>(peer.round)},
          Audience::kTarget));
      continue;
    }
    CollectiveSlot& box = layout_.Offer(access_.control(peer.pe), rank_, peer.round);
    for (int i = 1; i < CollectiveDescriptor::kWords; ++i) {
      box.words[i - 1].store(mine[i], std::memory_order_relaxed);
    }
    box.sequence.store(peer.round, std::memory_order_release);
    Ring<kSite>(&access_.control(peer.pe)->doorbell);
  }
  auto arrived = [&](const PeerRound& peer) {
    return layout_.Offer(access_.control(rank_), peer.pe, peer.round)
               .sequence.load(std::memory_order_acquire) >= peer.round;
  };
  auto everyone = [&] {
    for (const PeerRound& peer : peers) {
      if (!arrived(peer)) return false;
    }
    return true;
  };
  auto missing = [&] {
    std::string text = "[";
    for (const PeerRound& peer : peers) {
      if (arrived(peer)) continue;
      if (text.size() > 1) text += ',';
      text += std::to_string(peer.pe);
    }
    return text + "]";
  };
  auto notice = [&] {
    return Register(operation, nullptr, [missing] { return "missing_pes=" + missing(); });
  };
  const WaitOutcome outcome = Await<kSite>(everyone, notice);
  if (outcome == WaitOutcome::kAborted) return latch_->Get();
  if (outcome == WaitOutcome::kTimedOut) {
    return Latched(Status::Assertion(ErrorCode::kTimeout,
                                     std::string(operation) + " timed out waiting for PEs",
                                     {{"pe", std::to_string(rank_)},
                                      {"missing_pes", missing()},
                                      {"timeout_ms", std::to_string(timeout_.count())}}));
  }
  theirs->assign(peers.size(), ExchangeWords{});
  for (std::size_t i = 0; i < peers.size(); ++i) {
    const CollectiveSlot& box = layout_.Offer(access_.control(rank_), peers[i].pe, peers[i].round);
    ExchangeWords& words = (*theirs)[i];
    words[0] = box.sequence.load(std::memory_order_acquire);
    for (int w = 1; w < CollectiveDescriptor::kWords; ++w) {
      words[w] = box.words[w - 1].load(std::memory_order_relaxed);
    }
    if (words[0] != peers[i].round) {
      return Latched(Status::Assertion(
          ErrorCode::kCollectiveMismatch,
          "a PE is ahead in the members-only exchanges with this PE",
          {{"operation", std::string(operation)}, {"pe", std::to_string(peers[i].pe)},
           {"round", std::to_string(peers[i].round)},
           {"their_round", std::to_string(words[0])}}));
    }
  }
  return Status::Ok();
}

template <CallSite kSite>
void HostDevice::StoreOwn(const data_plane::CollectiveGroup& group, const CollectiveDescriptor& mine) const {
  const auto words = mine.Pack();
  CollectiveSlot& own = layout_.Collective(access_.control(rank_), group.sync_slot, mine.sequence);
  for (int i = 1; i < CollectiveDescriptor::kWords; ++i) {
    own.words[i - 1].store(words[i], std::memory_order_relaxed);
  }
  own.sequence.store(mine.sequence, std::memory_order_release);
  for (int member = 0; member < group.size(); ++member) {
    const int pe = group.pe(member);
    if (pe != rank_ && !IsRemote(pe)) Ring<kSite>(&access_.control(pe)->doorbell);
  }
}

template <CallSite kSite, class Describe>
Status HostDevice::AwaitSlot(const SummarySlot& slot, std::uint64_t sequence, std::string_view operation,
                           const HostStream* stream, const Describe& describe, int from,
                           std::string what) const {
  auto ready = [&] { return slot.sequence.load(std::memory_order_acquire) >= sequence; };
  auto notice = [&] {
    return Register(operation, stream, [describe, from, what] {
      return describe() + ", waiting_for=" + what + ", missing_pes=[" + std::to_string(from) +
             "]";
    });
  };
  const WaitOutcome outcome = Await<kSite>(ready, notice);
  if (outcome == WaitOutcome::kReady) return Status::Ok();
  if (outcome == WaitOutcome::kAborted) return latch_->Get();
  return Latched(Status::Assertion(ErrorCode::kTimeout,
                                   "collective call timed out waiting for PEs to enter it",
                                   {{"pe", std::to_string(rank_)},
                                    {"collective", describe()},
                                    {"waiting_for", what},
                                    {"missing_pes", "[" + std::to_string(from) + "]"},
                                    {"timeout_ms", std::to_string(timeout_.count())}}));
}

template <CallSite kSite>
void HostDevice::SendSummary(int to, int team, int round, const DescriptorSummary& summary) const {
  if (!IsRemote(to)) {
    StoreSummary(layout_.Round(access_.control(to), team, round, summary.sequence), summary);
    Ring<kSite>(&access_.control(to)->doorbell);
    return;
  }
  const auto words = summary.Pack();
  const SummarySlot& box = layout_.Round(access_.control(rank_), team, round, summary.sequence);
  Check<kSite>(access_.transport()->PutSignal(
      to, RemoteOffset(&box.words[0]), &words[1],
      (DescriptorSummary::kWords - 1) * sizeof(std::uint64_t),
      RemoteSignal{RemoteOffset(&box.sequence), 8, SignalAction::kSet,
                   static_cast<std::int64_t>(summary.sequence)},
      Audience::kTarget));
}
}  // namespace hyper_parallel::shmem::host
