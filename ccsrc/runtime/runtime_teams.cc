// Runtime: teams (docs/teams.md). The collective path itself is RunCollective's, with the
// team's group; this file makes, describes and ends teams.
//
// Making a team agrees on two things among its members only, through the backend's
// members-only exchange (Backend::ExchangeWithPeers, one round per pair of PEs):
//   1. the members (every member must list the same PEs in the same order) and either the live
//      team of those ranks (its handles share it) or a slot free on every member (the lowest
//      set bit of the AND of their free-slot masks, so every member picks the same one);
//   2. for a new team, the number its collectives continue from: the highest number any
//      member used on that slot before, since the slot's control words only grow.
// Every member reads the same words and so reaches the same verdict, including a refusal
// (different members, no free slot): the pairs' rounds stay in step either way.
#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "base/log.h"
#include "runtime/runtime.h"

namespace hyper_parallel::shmem {
namespace {

// Word 1 of an offer: a tag and the phase, so that words of another kind never pass for one.
constexpr std::uint64_t kOfferTag = 0x5445414d00000000ull;  // "TEAM"
constexpr int kOfferPhaseMembers = 1;
constexpr int kOfferPhaseSequence = 2;
// Offer words: [2] member count, [3] members' digest, [4] phase 1: live slot + 1 (0: none),
// phase 2: the slot's highest number here; [6, 10): the free-slot mask (Config::kMaxMaxTeams).
constexpr int kWordCount = 2, kWordDigest = 3, kWordValue = 4, kWordMask = 6, kMaskWords = 4;
static_assert(kWordMask + kMaskWords <= CollectiveDescriptor::kWords);
static_assert(Config::kMaxMaxTeams <= 64 * kMaskWords);

// A handle's number carries the PE that made it (rank + 1) above this bit, so that a handle
// of another PE's team (which this PE is not in) is told apart from one of this PE's own.
constexpr int kHandleOwnerShift = 40;

std::uint64_t Digest(const std::vector<int>& pes) {
  std::uint64_t digest = 1469598103934665603ull;
  for (int pe : pes) {
    for (int byte = 0; byte < 4; ++byte) {
      digest = (digest ^ ((static_cast<std::uint32_t>(pe) >> (8 * byte)) & 0xff)) *
               1099511628211ull;
    }
  }
  return digest;
}

std::string JoinPes(const std::vector<int>& pes) {
  std::string text = "[";
  for (std::size_t i = 0; i < pes.size(); ++i) {
    if (i > 0) text += ",";
    text += std::to_string(pes[i]);
  }
  return text + "]";
}

// Members of a strided split: parent members start, start + stride, ... (size of them), or
// INVALID_ARGUMENT naming the rule the triplet breaks.
Status StridedMembers(const data_plane::CollectiveGroup& parent, std::int64_t start,
                      std::int64_t stride, std::int64_t size, std::vector<int>* pes) {
  const std::int64_t n = parent.size();
  const std::string triplet = "start=" + std::to_string(start) + ", stride=" +
                              std::to_string(stride) + ", size=" + std::to_string(size);
  if (size < 1 || start < 0 || start >= n) {
    return Status::Contract(ErrorCode::kInvalidArgument, "team_split_strided triplet",
                            "size >= 1 and start in [0, " + std::to_string(n) +
                                ") (the parent's PEs)",
                            triplet);
  }
  if (stride == 0 && size != 1) {
    return Status::Contract(ErrorCode::kInvalidArgument, "team_split_strided triplet",
                            "size 1 when stride is 0", triplet);
  }
  const std::int64_t last = start + stride * (size - 1);
  if (last < 0 || last >= n) {
    return Status::Contract(ErrorCode::kInvalidArgument, "team_split_strided triplet",
                            "every PE inside the parent's " + std::to_string(n) +
                                " PEs (the last is start + stride * (size - 1))",
                            triplet);
  }
  pes->clear();
  for (std::int64_t i = 0; i < size; ++i) {
    pes->push_back(parent.pe(static_cast<int>(start + stride * i)));
  }
  return Status::Ok();
}

}  // namespace

Status Runtime::BeginTeamChange(std::string_view operation) {
  if (creating_team_) {
    return Status::Assertion(ErrorCode::kInvalidState,
                             "another thread of this PE is creating or destroying a team; "
                             "team creation and destruction are one at a time per PE",
                             {{"operation", std::string(operation)}});
  }
  creating_team_ = true;
  return Status::Ok();
}

Status Runtime::ResolveTeam(const TeamHandle& handle, std::shared_ptr<TeamState>* out) const {
  if (!handle.valid()) {
    return Status::Contract(ErrorCode::kInvalidArgument, "team", "a team this PE is in",
                            "an invalid team handle (this PE is outside that team)");
  }
  if (handle.lifecycle != 0 && handle.lifecycle != registry_.lifecycle()) {
    return Status::Assertion(ErrorCode::kStaleLifecycle,
                             "team handle of an older lifecycle (every team ends at the last "
                             "close)",
                             {{"handle_lifecycle", std::to_string(handle.lifecycle)},
                              {"current_lifecycle", std::to_string(registry_.lifecycle())}});
  }
  const auto slot = static_cast<std::size_t>(handle.slot);
  if ((handle.id == 0 && handle.slot != 0) || slot >= teams_.size()) {
    return Status::Contract(ErrorCode::kInvalidArgument, "team",
                            "a handle the runtime handed out",
                            "slot " + std::to_string(handle.slot) + ", handle " +
                                std::to_string(handle.id));
  }
  if (handle.id != 0 &&
      handle.id >> kHandleOwnerShift != static_cast<std::uint64_t>(rank_) + 1) {
    return Status::Contract(ErrorCode::kInvalidArgument, "team", "a team this PE is in",
                            "a handle made on PE " +
                                std::to_string(static_cast<std::int64_t>(
                                    handle.id >> kHandleOwnerShift) - 1));
  }
  const std::shared_ptr<TeamState>& team = teams_[slot];
  const bool alive = team != nullptr &&
                     (handle.id == 0 || std::find(team->handles.begin(), team->handles.end(),
                                                  handle.id) != team->handles.end());
  if (!alive) {
    // Named as the user knows it: the team of world PEs [...] that this handle was.
    const auto known = destroyed_teams_.find(handle.id);
    return Status::Assertion(
        ErrorCode::kInvalidArgument,
        "team was destroyed (team.destroy(), or the end of its with block); make a new one",
        {{"team", known != destroyed_teams_.end() ? "the team of world PEs " + known->second
                                                  : "a team handle"}});
  }
  *out = team;
  return Status::Ok();
}

void Runtime::DescribeTeamLocked(const TeamState& team, TeamInfo* out) const {
  out->slot = team.group.sync_slot;
  out->pes = *team.group.pes;
  out->my_pe = team.group.index;
  out->sequence = team.sequence;
  out->first_sequence = team.first_sequence;
  out->handles = static_cast<int>(team.handles.size());
  out->predefined = team.predefined;
}

Status Runtime::ExchangeOffer(const std::vector<int>& pes, const ExchangeWords& mine,
                              std::string_view operation, std::vector<ExchangeWords>* theirs) {
  std::vector<PeerRound> peers;
  for (int pe : pes) {
    if (pe != rank_) peers.push_back({pe, ++pair_rounds_[static_cast<std::size_t>(pe)]});
  }
  Backend* backend = backend_.get();
  Status exchanged;
  {
    CallScope call(this);
    mutex_.Unlock();
    exchanged = backend->ExchangeWithPeers(peers, mine, operation, theirs);
    mutex_.Lock();
  }
  return exchanged;
}

Status Runtime::MakeTeam(const std::vector<int>& pes, std::string_view operation,
                         TeamHandle* out) {
  const auto me = static_cast<int>(std::find(pes.begin(), pes.end(), rank_) - pes.begin());
  int existing = -1;
  for (std::size_t slot = 0; slot < teams_.size(); ++slot) {
    if (teams_[slot] != nullptr && *teams_[slot]->group.pes == pes) existing = static_cast<int>(slot);
  }
  ExchangeWords offer{};
  offer[1] = kOfferTag | kOfferPhaseMembers;
  offer[kWordCount] = pes.size();
  offer[kWordDigest] = Digest(pes);
  offer[kWordValue] = static_cast<std::uint64_t>(existing + 1);
  for (std::size_t slot = 1; slot < teams_.size(); ++slot) {
    if (teams_[slot] == nullptr) offer[kWordMask + slot / 64] |= 1ull << (slot % 64);
  }
  std::vector<ExchangeWords> theirs;
  HPS_RETURN_IF_ERROR(ExchangeOffer(pes, offer, operation, &theirs));
  // theirs[i] is the i-th other member's, in member order.
  std::vector<int> others;
  for (int pe : pes) {
    if (pe != rank_) others.push_back(pe);
  }
  const char* field = nullptr;
  for (const ExchangeWords& words : theirs) {
    if (words[1] != offer[1] || words[kWordCount] != offer[kWordCount] ||
        words[kWordDigest] != offer[kWordDigest]) {
      field = "members";
    } else if (field == nullptr && words[kWordValue] != offer[kWordValue]) {
      field = "live_team";
    }
  }
  if (field != nullptr) {
    std::string calls = "pe " + std::to_string(rank_) + ": " + JoinPes(pes) +
                        (existing >= 0 ? " (live in slot " + std::to_string(existing) + ")" : "");
    for (std::size_t i = 0; i < theirs.size(); ++i) {
      calls += "; pe " + std::to_string(others[i]) + ": " +
               std::to_string(theirs[i][kWordCount]) + " PEs, digest " +
               Hex(theirs[i][kWordDigest]) +
               (theirs[i][kWordValue] > 0
                    ? " (live in slot " + std::to_string(theirs[i][kWordValue] - 1) + ")"
                    : "");
    }
    return Status::Assertion(ErrorCode::kCollectiveMismatch,
                             "team creation calls differ across the new team's PEs",
                             {{"field", field}, {"pes", JoinPes(pes)}, {"calls", calls}});
  }
  const std::uint64_t id =
      (static_cast<std::uint64_t>(rank_) + 1) << kHandleOwnerShift | ++next_team_handle_;
  if (existing >= 0) {  // the same ranks: a new handle of the live team
    teams_[static_cast<std::size_t>(existing)]->handles.push_back(id);
    *out = TeamHandle{registry_.lifecycle(), existing, id};
    return Status::Ok();
  }
  int slot = -1;
  for (int word = 0; word < kMaskWords && slot < 0; ++word) {
    std::uint64_t free = offer[kWordMask + word];
    for (const ExchangeWords& words : theirs) free &= words[kWordMask + word];
    if (free != 0) slot = word * 64 + std::countr_zero(free);
  }
  if (slot < 0) {
    return Status::Assertion(ErrorCode::kInvalidState,
                             "no team slot is free on every PE of the new team; destroy teams "
                             "no longer needed or raise HYPER_PARALLEL_SHMEM_MAX_TEAMS",
                             {{"pes", JoinPes(pes)},
                              {"max_teams", std::to_string(config_.max_teams)}});
  }
  ExchangeWords high{};
  high[1] = kOfferTag | kOfferPhaseSequence;
  high[kWordCount] = pes.size();
  high[kWordDigest] = offer[kWordDigest];
  high[kWordValue] = slot_high_[static_cast<std::size_t>(slot)];
  HPS_RETURN_IF_ERROR(ExchangeOffer(pes, high, operation, &theirs));
  std::uint64_t base = high[kWordValue];
  for (const ExchangeWords& words : theirs) base = std::max(base, words[kWordValue]);
  auto team = std::make_shared<TeamState>();
  team->group = data_plane::CollectiveGroup{std::make_shared<const std::vector<int>>(pes), me,
                                            slot};
  team->first_sequence = base;
  team->sequence = base;
  team->handles.push_back(id);
  teams_[static_cast<std::size_t>(slot)] = std::move(team);
  slot_high_[static_cast<std::size_t>(slot)] = base;
  *out = TeamHandle{registry_.lifecycle(), slot, id};
  HPS_LOG_DEBUG("op=TeamCreate slot=" + std::to_string(slot) + " pes=" + JoinPes(pes) +
                " first_sequence=" + std::to_string(base));
  return Status::Ok();
}

Status Runtime::BeginSplit(std::string_view operation, const TeamHandle& parent_handle,
                           std::shared_ptr<TeamState>* parent) {
  HPS_REJECT_IF_ERROR(CheckReady(operation), operation, "state");
  HPS_REJECT_IF_ERROR(ResolveTeam(parent_handle, parent), operation, "validate");
  HPS_REJECT_IF_ERROR(BeginTeamChange(operation), operation, "state");
  return Status::Ok();
}

Status Runtime::AgreeSplit(TeamState& parent, std::string_view operation,
                           std::array<int, 3> arguments) {
  HPS_RETURN_IF_ERROR(WaitForOtherCollectives(parent, operation));
  CollectiveDescriptor mine = CollectiveDescriptor::Of(operation, data_plane::kAgreeArguments);
  for (std::size_t i = 0; i < arguments.size(); ++i) {
    mine.extra[i] = static_cast<std::uint64_t>(static_cast<std::int64_t>(arguments[i]));
  }
  HPS_RETURN_IF_ERROR(ClaimCollective(parent, OwnerOf({}, true), operation, &mine.sequence));
  return Agree(parent, operation, mine);
}

Status Runtime::NodeTeam(TeamHandle* out) {
  constexpr std::string_view kOp = "team_node";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  // The PEs whose host is this PE's (a backend that does not say has one host).
  const std::vector<PeerPlacement> placement = backend_->Placement();
  std::vector<int> node;
  for (int pe = 0; pe < static_cast<int>(placement.size()); ++pe) {
    if (placement[pe].host == placement[rank_].host) node.push_back(pe);
  }
  if (placement.empty() || static_cast<int>(node.size()) == size_) {
    *out = kWorldTeam;
    return Status::Ok();
  }
  std::shared_ptr<TeamState> made_before;
  if (node_team_.valid() && ResolveTeam(node_team_, &made_before).ok()) {
    *out = node_team_;
    return Status::Ok();
  }
  HPS_REJECT_IF_ERROR(BeginTeamChange(kOp), kOp, "state");
  Status made = MakeTeam(node, kOp, out);
  creating_team_ = false;
  if (made.ok()) node_team_ = *out;
  return ConcludeLocked(std::move(made), kOp, "create");
}

Status Runtime::TeamCreate(const std::vector<int>& pes, TeamHandle* out) {
  constexpr std::string_view kOp = "team_create";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::vector<int> sorted = pes;
  std::sort(sorted.begin(), sorted.end());
  if (pes.empty() || sorted.front() < 0 || sorted.back() >= size_ ||
      std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return RejectLocked(Status::Contract(ErrorCode::kInvalidArgument, "team PEs",
                                         "distinct PE numbers in [0, " + std::to_string(size_) +
                                             ")",
                                         JoinPes(pes)),
                        kOp, "validate");
  }
  if (!std::binary_search(sorted.begin(), sorted.end(), rank_)) {
    return RejectLocked(Status::Contract(ErrorCode::kInvalidArgument, "team PEs",
                                         "a list with this PE (" + std::to_string(rank_) +
                                             "): creating a team is collective over its "
                                             "members only",
                                         JoinPes(pes)),
                        kOp, "validate");
  }
  HPS_REJECT_IF_ERROR(BeginTeamChange(kOp), kOp, "state");
  Status made = MakeTeam(pes, kOp, out);
  creating_team_ = false;
  return ConcludeLocked(std::move(made), kOp, "create");
}

Status Runtime::TeamSplitStrided(const TeamHandle& parent_handle, int start, int stride,
                                 int size, TeamHandle* out) {
  constexpr std::string_view kOp = "split_strided";
  *out = TeamHandle{};
  MutexLock lock(&mutex_);
  std::shared_ptr<TeamState> parent;
  HPS_RETURN_IF_ERROR(BeginSplit(kOp, parent_handle, &parent));
  // Agreement first: PEs with different arguments all get COLLECTIVE_MISMATCH; then every PE
  // judges the same triplet alike.
  Status status = AgreeSplit(*parent, kOp, {start, stride, size});
  std::vector<int> pes;
  if (status.ok()) status = StridedMembers(parent->group, start, stride, size, &pes);
  if (status.ok() && std::find(pes.begin(), pes.end(), rank_) != pes.end()) {
    status = MakeTeam(pes, kOp, out);
  }
  creating_team_ = false;
  return ConcludeLocked(std::move(status), kOp, "split");
}

Status Runtime::TeamSplit2d(const TeamHandle& parent_handle, int xrange, TeamHandle* xteam,
                            TeamHandle* yteam) {
  constexpr std::string_view kOp = "split_2d";
  *xteam = TeamHandle{};
  *yteam = TeamHandle{};
  MutexLock lock(&mutex_);
  std::shared_ptr<TeamState> parent;
  HPS_RETURN_IF_ERROR(BeginSplit(kOp, parent_handle, &parent));
  Status status = AgreeSplit(*parent, kOp, {xrange, 0, 0});
  const int n = parent->group.size();
  if (status.ok() && (xrange < 1 || xrange > n)) {
    status = Status::Contract(ErrorCode::kInvalidArgument, "team_split_2d xrange",
                              "in [1, " + std::to_string(n) + "] (the parent's PEs)",
                              std::to_string(xrange));
  }
  if (status.ok()) {
    // Parent PE p sits at (p mod xrange, p div xrange); its row shares its y, its column its x.
    const int p = parent->group.index, x = p % xrange, y = p / xrange;
    std::vector<int> row, column;
    for (int i = y * xrange; i < std::min(n, (y + 1) * xrange); ++i) {
      row.push_back(parent->group.pe(i));
    }
    for (int i = x; i < n; i += xrange) column.push_back(parent->group.pe(i));
    // Both are made even when the first fails, so that every PE takes part in the creations
    // its row and column partners wait for.
    status = MakeTeam(row, kOp, xteam);
    Status second = MakeTeam(column, kOp, yteam);
    if (status.ok()) status = std::move(second);
  }
  creating_team_ = false;
  return ConcludeLocked(std::move(status), kOp, "split");
}

Status Runtime::TeamDestroy(const TeamHandle& handle) {
  constexpr std::string_view kOp = "team_destroy";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::shared_ptr<TeamState> team;
  HPS_REJECT_IF_ERROR(ResolveTeam(handle, &team), kOp, "validate");
  if (handle.id == 0) {
    return RejectLocked(Status::Contract(ErrorCode::kInvalidArgument, "team",
                                         "a team made by a split or from PEs",
                                         "a predefined team (TEAM_WORLD, TEAM_NODE), which "
                                         "ends with the lifecycle"),
                        kOp, "validate");
  }
  HPS_REJECT_IF_ERROR(BeginTeamChange(kOp), kOp, "state");
  Status status = WaitForOtherCollectives(*team, kOp);
  // Every member must be destroying alike: the handles left after this one are compared.
  CollectiveDescriptor mine = CollectiveDescriptor::Of(kOp, data_plane::kAgreeArguments);
  mine.extra[0] = team->handles.size() - 1;
  if (status.ok()) status = ClaimCollective(*team, OwnerOf({}, true), kOp, &mine.sequence);
  if (status.ok()) status = Agree(*team, kOp, mine);
  if (status.ok()) {
    // A later use of the handle names the team as its user knew it (bounded: the oldest go).
    if (destroyed_teams_.size() >= kDestroyedTeamsKept) {
      destroyed_teams_.erase(destroyed_teams_.begin());
    }
    destroyed_teams_[handle.id] = JoinPes(*team->group.pes);
    team->handles.erase(std::find(team->handles.begin(), team->handles.end(), handle.id));
    if (team->handles.empty() && !team->predefined) {
      HPS_LOG_DEBUG("op=TeamDestroy slot=" + std::to_string(team->group.sync_slot) +
                    " pes=" + JoinPes(*team->group.pes));
      teams_[static_cast<std::size_t>(team->group.sync_slot)].reset();
    }
  }
  creating_team_ = false;
  return ConcludeLocked(std::move(status), kOp, "destroy");
}

Status Runtime::DescribeTeam(const TeamHandle& handle, TeamInfo* out) {
  constexpr std::string_view kOp = "team_info";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::shared_ptr<TeamState> team;
  HPS_REJECT_IF_ERROR(ResolveTeam(handle, &team), kOp, "validate");
  DescribeTeamLocked(*team, out);
  return Status::Ok();
}

Status Runtime::TeamPe(const TeamHandle& handle, int team_pe, int* world_pe) {
  constexpr std::string_view kOp = "team_pe";
  MutexLock lock(&mutex_);
  HPS_REJECT_IF_ERROR(CheckReady(kOp), kOp, "state");
  std::shared_ptr<TeamState> team;
  HPS_REJECT_IF_ERROR(ResolveTeam(handle, &team), kOp, "validate");
  if (team_pe < 0 || team_pe >= team->group.size()) {
    return RejectLocked(Status::Contract(ErrorCode::kInvalidArgument, "pe",
                                         "a team PE in [0, " +
                                             std::to_string(team->group.size()) + ") of " +
                                             GroupLabel(team->group),
                                         std::to_string(team_pe)),
                        kOp, "validate");
  }
  *world_pe = team->group.pe(team_pe);
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem
