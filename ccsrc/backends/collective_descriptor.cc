#include "backends/collective_descriptor.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "base/mutex.h"

namespace hyper_parallel::shmem {
namespace {

using data_plane::kAgreeAlignment;
using data_plane::kAgreeArguments;
using data_plane::kAgreeBytes;
using data_plane::kAgreeDtype;
using data_plane::kAgreeLocal;
using data_plane::kAgreeOffset;

// words[1]'s refusal bit (above the fields byte and the local outcome's byte).
constexpr std::uint64_t kRefusedBit = std::uint64_t{1} << 20;

template <std::size_t N>
void StoreName(std::array<char, N>* field, std::string_view name) {
  field->fill('\0');
  if (name.empty()) return;  // a default string_view's data() may be null
  std::memcpy(field->data(), name.data(), std::min(name.size(), field->size() - 1));
}

template <std::size_t N>
std::string_view NameOf(const std::array<char, N>& field) {
  return std::string_view(field.data(), ::strnlen(field.data(), field.size()));
}

// The first compared field in which `a` and `b` differ, or null. The fields compared are the
// ones `a` (PE 0's call) declares.
const char* FirstDifference(const CollectiveDescriptor& a, const CollectiveDescriptor& b) {
  // A refusal first: whatever the others called in its place fails naming it.
  if (a.refused != b.refused) return "refused";
  if (a.kind != b.kind) return "kind";
  if (a.sequence != b.sequence) return "sequence";
  if (a.refused) return nullptr;  // refused everywhere: each PE reports its own reason
  if (a.fields != b.fields) return "fields";
  if ((a.fields & kAgreeBytes) && a.bytes != b.bytes) return "bytes";
  if ((a.fields & kAgreeAlignment) && a.alignment != b.alignment) return "alignment";
  if ((a.fields & kAgreeDtype) && a.dtype != b.dtype) return "dtype";
  if ((a.fields & kAgreeOffset) && a.offset != b.offset) return "offset";
  if ((a.fields & kAgreeLocal) && a.local != b.local) return "local_outcome";
  if ((a.fields & kAgreeArguments) && a.extra != b.extra) return "arguments";
  return nullptr;
}

// The argument names of the kinds noted (NoteArgumentNames), for the mismatch messages.
struct ArgumentVocabulary {
  std::array<std::string_view, 3> names{};
  const data_plane::Collective* collective = nullptr;  // reads the values, where noted
};

class ArgumentNames {
 public:
  static ArgumentNames& Process() {
    static ArgumentNames* names = new ArgumentNames();  // never destroyed: read at exit too
    return *names;
  }
  void Note(std::string_view kind, ArgumentVocabulary vocabulary) {
    MutexLock lock(&mutex_);
    kinds_[std::string(kind)] = vocabulary;
  }
  bool Find(std::string_view kind, ArgumentVocabulary* out) {
    MutexLock lock(&mutex_);
    const auto at = kinds_.find(std::string(kind));
    if (at == kinds_.end()) return false;
    *out = at->second;
    return true;
  }

 private:
  Mutex mutex_;
  std::map<std::string, ArgumentVocabulary> kinds_ GUARDED_BY(mutex_);
};

// How argument `index` of `d` reads ("sum"); `name` gets its name ("op"), or "" where the kind
// names none (not noted, or an argument it does not take).
std::string NamedArgument(const CollectiveDescriptor& d, int index, std::string* name) {
  const auto value = static_cast<std::int64_t>(d.extra[static_cast<std::size_t>(index)]);
  ArgumentVocabulary vocabulary;
  name->clear();
  if (!ArgumentNames::Process().Find(d.kind_name(), &vocabulary)) return std::to_string(value);
  *name = std::string(vocabulary.names[static_cast<std::size_t>(index)]);
  return vocabulary.collective ? vocabulary.collective->ArgumentValue(index, value)
                               : std::to_string(value);
}

// "op=sum", "start=0 stride=2 size=2": the named arguments of `d` (kAgreeArguments), or
// "arguments=[a,b,c]" for a kind that names none.
std::string ArgumentsText(const CollectiveDescriptor& d) {
  std::string text;
  for (int i = 0; i < 3; ++i) {
    std::string name;
    const std::string value = NamedArgument(d, i, &name);
    if (name.empty()) continue;
    if (!text.empty()) text += " ";
    text += name + "=" + value;
  }
  if (!text.empty()) return text;
  text = "arguments=[";
  for (std::size_t i = 0; i < d.extra.size(); ++i) {
    if (i > 0) text += ",";
    text += std::to_string(static_cast<std::int64_t>(d.extra[i]));
  }
  return text + "]";
}

// How `field` reads in `d` ("sum"), and its name ("op"): `argument` is the index of the first
// argument that differs, for field "arguments".
std::string FieldValue(const CollectiveDescriptor& d, std::string_view field, int argument,
                       std::string* name) {
  if (field == "kind" || field == "fields") {
    *name = "call";
    return d.kind[0] == '\0' ? std::string("none") : std::string(d.kind_name());
  }
  if (field == "bytes") {
    const std::string_view kind = d.kind_name();
    *name = kind == "empty" || kind == "free" ? "allocation bytes" : "input bytes";
    return std::to_string(d.bytes);
  }
  if (field == "alignment") {
    *name = "alignment";
    return std::to_string(d.alignment);
  }
  if (field == "dtype") {
    *name = "dtype";
    return d.dtype[0] == '\0' ? std::string("-") : std::string(d.dtype_name());
  }
  if (field == "offset") {
    *name = "symmetric output (heap offset)";
    return d.offset == kNoOffset ? std::string("-") : Hex(d.offset);
  }
  if (field == "local_outcome") {
    *name = "local outcome";
    return std::string(ErrorCodeName(d.local));
  }
  if (field == "arguments") {
    const std::string value = NamedArgument(d, argument, name);
    if (name->empty()) *name = "argument " + std::to_string(argument);
    return value;
  }
  *name = std::string(field);
  return "#" + std::to_string(d.sequence);
}

// "op: sum on PE 0, max on PE 1" (PEs grouped by value, in the order the values first appear;
// team PEs named as the team numbers them).
std::string DifferenceText(std::string_view field, const std::vector<int>& pes,
                           const std::vector<const CollectiveDescriptor*>& calls,
                           const data_plane::CollectiveGroup* group) {
  int argument = 0;  // the first argument on which the calls differ
  if (field == "arguments") {
    for (; argument < 2; ++argument) {
      bool same = true;
      for (const CollectiveDescriptor* call : calls) {
        same = same && call->extra[argument] == calls[0]->extra[argument];
      }
      if (!same) break;
    }
  }
  const bool team = group != nullptr && group->sync_slot != 0;
  std::string name;
  std::vector<std::pair<std::string, std::vector<int>>> values;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const std::string value = FieldValue(*calls[i], field, argument, &name);
    int pe = pes[i];
    if (team) {
      const auto& members = *group->pes;
      pe = static_cast<int>(std::find(members.begin(), members.end(), pes[i]) - members.begin());
    }
    auto at = std::find_if(values.begin(), values.end(),
                           [&](const auto& entry) { return entry.first == value; });
    if (at == values.end()) {
      values.push_back({value, {pe}});
    } else {
      at->second.push_back(pe);
    }
  }
  std::string text = name + ": ";
  constexpr std::size_t kListedValues = 4;
  for (std::size_t v = 0; v < values.size() && v < kListedValues; ++v) {
    if (v > 0) text += ", ";
    const std::vector<int>& on = values[v].second;
    text.append(values[v].first).append(on.size() == 1 ? " on PE " : " on PEs ");
    for (std::size_t k = 0; k < on.size() && k < 8; ++k) {
      if (k > 0) text += ",";
      text += std::to_string(on[k]);
    }
    if (on.size() > 8) text += ",...";
  }
  if (values.size() > kListedValues) text += ", ...";
  return text;
}

}  // namespace

void NoteArgumentNames(const data_plane::Collective& collective) {
  ArgumentVocabulary vocabulary;
  for (int i = 0; i < 3; ++i) vocabulary.names[i] = collective.ArgumentName(i);
  vocabulary.collective = &collective;
  ArgumentNames::Process().Note(collective.name(), vocabulary);
}

void NoteArgumentNames(std::string_view kind, std::array<std::string_view, 3> names) {
  ArgumentNames::Process().Note(kind, ArgumentVocabulary{names, nullptr});
}

CollectiveDescriptor CollectiveDescriptor::Refusal(std::string_view kind, const Status& why) {
  CollectiveDescriptor d = Of(kind, 0);
  d.refused = true;
  d.local = why.code();
  std::string text = why.message();
  if (text.size() >= d.reason.size()) text = text.substr(0, d.reason.size() - 4) + "...";
  StoreName(&d.reason, text);
  return d;
}

std::string CollectiveDescriptor::reason_text() const {
  return std::string(ErrorCodeName(local)) + ": " + std::string(NameOf(reason));
}

CollectiveDescriptor CollectiveDescriptor::Of(std::string_view kind, unsigned fields) {
  CollectiveDescriptor d;
  StoreName(&d.kind, kind);
  d.fields = fields;
  return d;
}

std::string_view CollectiveDescriptor::kind_name() const { return NameOf(kind); }

void CollectiveDescriptor::SetDtype(std::string_view name) { StoreName(&dtype, name); }

std::string_view CollectiveDescriptor::dtype_name() const { return NameOf(dtype); }

bool CollectiveDescriptor::DecidedByCoreWords() const {
  return !refused && (fields & (kAgreeAlignment | kAgreeArguments)) == 0;
}

std::array<std::uint64_t, CollectiveDescriptor::kWords> CollectiveDescriptor::Pack() const {
  std::array<std::uint64_t, kWords> words{};
  words[0] = sequence;
  // The refusal bit sits above the rest, so a refusal orders after every call of its number.
  words[1] = static_cast<std::uint64_t>(fields & 0xff) | (static_cast<std::uint64_t>(local) << 8) |
             (refused ? kRefusedBit : 0);
  std::memcpy(&words[2], kind.data(), kind.size());
  if (refused) {
    std::memcpy(&words[4], reason.data(), reason.size());
    return words;
  }
  words[4] = bytes;
  words[5] = offset;
  std::memcpy(&words[6], dtype.data(), dtype.size());
  words[8] = alignment;
  for (std::size_t i = 0; i < extra.size(); ++i) words[9 + i] = extra[i];
  return words;
}

CollectiveDescriptor CollectiveDescriptor::Unpack(const std::array<std::uint64_t, kWords>& words) {
  CollectiveDescriptor d;
  d.sequence = words[0];
  d.fields = static_cast<unsigned>(words[1] & 0xff);
  d.local = static_cast<ErrorCode>((words[1] >> 8) & 0xff);
  d.refused = (words[1] & kRefusedBit) != 0;
  std::memcpy(d.kind.data(), &words[2], d.kind.size());
  d.kind.back() = '\0';
  if (d.refused) {
    std::memcpy(d.reason.data(), &words[4], d.reason.size());
    d.reason.back() = '\0';
    return d;
  }
  d.bytes = words[4];
  d.offset = words[5];
  std::memcpy(d.dtype.data(), &words[6], d.dtype.size());
  d.dtype.back() = '\0';
  d.alignment = words[8];
  for (std::size_t i = 0; i < d.extra.size(); ++i) d.extra[i] = words[9 + i];
  return d;
}

std::string CollectiveDescriptor::Describe() const {
  std::string text(kind[0] == '\0' ? std::string_view("none") : kind_name());
  text += " #" + std::to_string(sequence);
  if (refused) return text + " refused (" + reason_text() + ")";
  if (fields & kAgreeBytes) text += " bytes=" + std::to_string(bytes);
  if (fields & kAgreeAlignment) text += " alignment=" + std::to_string(alignment);
  if ((fields & kAgreeDtype) && dtype[0] != '\0') text += " dtype=" + std::string(dtype_name());
  if (fields & kAgreeOffset) {
    text += " offset=" + (offset == kNoOffset ? std::string("-") : Hex(offset));
  }
  if (fields & kAgreeArguments) text += " " + ArgumentsText(*this);
  if ((fields & kAgreeLocal) && local != ErrorCode::kOk) {
    text += " local=" + std::string(ErrorCodeName(local));
  }
  return text;
}

namespace {

// The words a descriptor is ordered and compared by: the packed descriptor with every field it
// does not compare cleared (two calls that agree have equal keys).
std::array<std::uint64_t, CollectiveDescriptor::kWords> KeyOf(const CollectiveDescriptor& d) {
  CollectiveDescriptor key = d;
  if (!(d.fields & kAgreeBytes)) key.bytes = 0;
  if (!(d.fields & kAgreeAlignment)) key.alignment = 0;
  if (!(d.fields & kAgreeDtype)) key.dtype.fill('\0');
  if (!(d.fields & kAgreeOffset)) key.offset = 0;
  if (!(d.fields & kAgreeLocal)) key.local = ErrorCode::kOk;
  if (!(d.fields & kAgreeArguments)) key.extra = {};
  key.reason = {};  // refusals agree whatever their reasons: each PE reports its own
  return key.Pack();
}

// Merges the ascending PE list `from` into `into` (both end at the first -1), keeping the
// lowest kListed; `more` is set when one was dropped.
void MergeListed(std::array<int, DescriptorFacts::kListed>* into, bool* more,
                 const std::array<int, DescriptorFacts::kListed>& from) {
  std::vector<int> all;
  for (int pe : *into) if (pe >= 0) all.push_back(pe);
  for (int pe : from) if (pe >= 0) all.push_back(pe);
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  if (all.size() > into->size()) *more = true;
  into->fill(-1);
  for (std::size_t i = 0; i < all.size() && i < into->size(); ++i) (*into)[i] = all[i];
}

std::vector<int> Listed(const std::array<int, DescriptorFacts::kListed>& pes) {
  std::vector<int> out;
  for (int pe : pes) if (pe >= 0) out.push_back(pe);
  return out;
}

// Two 32-bit PE numbers (each -1 or more) in one word, as pe + 1.
std::uint64_t PackPair(int a, int b) {
  return static_cast<std::uint64_t>(static_cast<std::uint32_t>(a + 1)) |
         (static_cast<std::uint64_t>(static_cast<std::uint32_t>(b + 1)) << 32);
}
void UnpackPair(std::uint64_t word, int* a, int* b) {
  *a = static_cast<int>(static_cast<std::uint32_t>(word)) - 1;
  *b = static_cast<int>(static_cast<std::uint32_t>(word >> 32)) - 1;
}

// The COLLECTIVE_MISMATCH every member reports, naming `field` and the calls of `pes` (world
// PE numbers) in `calls` order. A refusal reads "refused on PE p: <reason>".
Status MismatchStatus(const data_plane::CollectiveGroup* group, std::uint64_t sequence,
                      const char* field, const std::vector<int>& pes,
                      const std::vector<const CollectiveDescriptor*>& calls) {
  const bool team = group != nullptr && group->sync_slot != 0;
  auto team_pe = [&](int pe) {
    const auto& members = *group->pes;
    return static_cast<int>(std::find(members.begin(), members.end(), pe) - members.begin());
  };
  std::string text;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (i > 0) text += "; ";
    text += "pe " + std::to_string(pes[i]);
    if (team) text += " (team pe " + std::to_string(team_pe(pes[i])) + ")";
    text += ": " + calls[i]->Describe();
  }
  std::vector<Field> fields;
  if (team) fields.push_back({"team", GroupLabel(*group)});
  fields.push_back({"sequence", std::to_string(sequence)});
  const std::string_view what(field);
  if (what == "refused") {
    const CollectiveDescriptor* refusal = nullptr;
    int refusing = -1;
    for (std::size_t i = 0; i < calls.size() && refusal == nullptr; ++i) {
      if (calls[i]->refused) {
        refusal = calls[i];
        refusing = team ? team_pe(pes[i]) : pes[i];
      }
    }
    fields.push_back({"calls", text});
    return Status::Assertion(
        ErrorCode::kCollectiveMismatch,
        std::string(refusal->kind_name()) + " was refused on " + (team ? "team PE " : "PE ") +
            std::to_string(refusing) + ": " + refusal->reason_text() +
            " (no PE ran it; that PE's error has the whole reason)",
        fields);
  }
  fields.push_back({"field", field});
  fields.push_back({"calls", text});
  return Status::Assertion(ErrorCode::kCollectiveMismatch,
                           std::string(team ? "team collective calls differ across the team's PEs"
                                            : "collective calls differ across PEs") +
                               " (" + DifferenceText(what, pes, calls, group) + ")",
                           fields);
}

}  // namespace

Agreement Agreement::FromAll(const CollectiveDescriptor& mine,
                             const std::vector<CollectiveDescriptor>& all,
                             const data_plane::CollectiveGroup* group) {
  Agreement agreement;
  agreement.verdict = MatchDescriptors(mine, all, group);
  DescriptorSummary summary(mine.sequence);
  for (std::size_t member = 0; member < all.size(); ++member) {
    const int index = static_cast<int>(member);
    summary.Fold(all[member],
                 group != nullptr && index < group->size() ? group->pe(index) : index);
  }
  agreement.facts = summary.Conclude(group != nullptr ? *group : data_plane::CollectiveGroup{})
                        .facts;
  return agreement;
}

DescriptorSummary::DescriptorSummary(std::uint64_t sequence_number) : sequence(sequence_number) {
  not_ok.fill(-1);
  holding.fill(-1);
}

void DescriptorSummary::Fold(const CollectiveDescriptor& descriptor, int pe) {
  DescriptorSummary one(sequence);
  one.low = one.high = descriptor;
  one.low_pe = one.high_pe = pe;
  if (descriptor.local != ErrorCode::kOk) one.not_ok[0] = pe;
  if (descriptor.extra[0] != 0) one.holding[0] = pe;
  one.extra_low = one.extra_high = descriptor.extra;
  Combine(one);
}

void DescriptorSummary::Combine(const DescriptorSummary& other) {
  if (other.low_pe < 0) return;
  if (low_pe < 0) {
    *this = other;
    return;
  }
  const auto other_low = KeyOf(other.low);
  const auto own_low = KeyOf(low);
  if (other_low < own_low || (other_low == own_low && other.low_pe < low_pe)) {
    low = other.low;
    low_pe = other.low_pe;
  }
  const auto other_high = KeyOf(other.high);
  const auto own_high = KeyOf(high);
  if (other_high > own_high || (other_high == own_high && other.high_pe < high_pe)) {
    high = other.high;
    high_pe = other.high_pe;
  }
  not_ok_more = not_ok_more || other.not_ok_more;
  holding_more = holding_more || other.holding_more;
  MergeListed(&not_ok, &not_ok_more, other.not_ok);
  MergeListed(&holding, &holding_more, other.holding);
  for (std::size_t i = 0; i < extra_low.size(); ++i) {
    extra_low[i] = std::min(extra_low[i], other.extra_low[i]);
    extra_high[i] = std::max(extra_high[i], other.extra_high[i]);
  }
}

std::array<std::uint64_t, DescriptorSummary::kWords> DescriptorSummary::Pack() const {
  std::array<std::uint64_t, kWords> words{};
  words[0] = sequence;
  const auto low_words = low.Pack();
  const auto high_words = high.Pack();
  constexpr int kD = CollectiveDescriptor::kWords;
  for (int i = 0; i < kD; ++i) {
    words[1 + i] = low_words[i];
    words[1 + kD + i] = high_words[i];
  }
  int at = 1 + 2 * kD;  // 25
  words[at++] = PackPair(low_pe, high_pe);
  for (int i = 0; i < DescriptorFacts::kListed; i += 2) words[at++] = PackPair(not_ok[i], not_ok[i + 1]);
  for (int i = 0; i < DescriptorFacts::kListed; i += 2) words[at++] = PackPair(holding[i], holding[i + 1]);
  words[at++] = (not_ok_more ? 1u : 0u) | (holding_more ? 2u : 0u);
  for (std::uint64_t value : extra_low) words[at++] = value;
  for (std::uint64_t value : extra_high) words[at++] = value;
  return words;
}

DescriptorSummary DescriptorSummary::Unpack(const std::array<std::uint64_t, kWords>& words) {
  DescriptorSummary s(words[0]);
  constexpr int kD = CollectiveDescriptor::kWords;
  std::array<std::uint64_t, kD> low_words{}, high_words{};
  for (int i = 0; i < kD; ++i) {
    low_words[i] = words[1 + i];
    high_words[i] = words[1 + kD + i];
  }
  s.low = CollectiveDescriptor::Unpack(low_words);
  s.high = CollectiveDescriptor::Unpack(high_words);
  int at = 1 + 2 * kD;
  UnpackPair(words[at++], &s.low_pe, &s.high_pe);
  for (int i = 0; i < DescriptorFacts::kListed; i += 2) UnpackPair(words[at++], &s.not_ok[i], &s.not_ok[i + 1]);
  for (int i = 0; i < DescriptorFacts::kListed; i += 2) UnpackPair(words[at++], &s.holding[i], &s.holding[i + 1]);
  s.not_ok_more = (words[at] & 1u) != 0;
  s.holding_more = (words[at] & 2u) != 0;
  ++at;
  for (std::uint64_t& value : s.extra_low) value = words[at++];
  for (std::uint64_t& value : s.extra_high) value = words[at++];
  return s;
}

Agreement DescriptorSummary::Conclude(const data_plane::CollectiveGroup& group) const {
  Agreement agreement;
  agreement.facts.not_ok = Listed(not_ok);
  agreement.facts.not_ok_more = not_ok_more;
  agreement.facts.holding = Listed(holding);
  agreement.facts.holding_more = holding_more;
  agreement.facts.extra_low = extra_low;
  agreement.facts.extra_high = extra_high;
  if (low_pe < 0 || KeyOf(low) == KeyOf(high)) return agreement;
  const char* field = FirstDifference(low, high);
  if (field == nullptr) field = FirstDifference(high, low);
  if (field == nullptr) field = "fields";
  // The two calls in PE order, as a full listing would show them.
  std::vector<int> pes{low_pe, high_pe};
  std::vector<const CollectiveDescriptor*> calls{&low, &high};
  if (high_pe < low_pe) {
    std::swap(pes[0], pes[1]);
    std::swap(calls[0], calls[1]);
  }
  agreement.verdict = MismatchStatus(group.pes ? &group : nullptr, sequence, field, pes, calls);
  return agreement;
}

std::string GroupLabel(const data_plane::CollectiveGroup& group) {
  if (group.sync_slot == 0) return "world";
  std::string pes = "[";
  for (int member = 0; member < group.size(); ++member) {
    if (member > 0) pes += ",";
    pes += std::to_string(group.pe(member));
  }
  return "team " + std::to_string(group.sync_slot) + " pes=" + pes + "]";
}

Status MatchDescriptors(const CollectiveDescriptor& mine,
                        const std::vector<CollectiveDescriptor>& all,
                        const data_plane::CollectiveGroup* group) {
  // Every member compares against member 0's call, so every member names the same field.
  const CollectiveDescriptor& reference = all.empty() ? mine : all.front();
  const char* field = FirstDifference(reference, mine);
  for (std::size_t member = 1; field == nullptr && member < all.size(); ++member) {
    field = FirstDifference(reference, all[member]);
  }
  if (field == nullptr) return Status::Ok();
  std::vector<int> pes;
  std::vector<const CollectiveDescriptor*> calls;
  for (std::size_t member = 0; member < all.size(); ++member) {
    const int index = static_cast<int>(member);
    pes.push_back(group != nullptr && index < group->size() ? group->pe(index) : index);
    calls.push_back(&all[member]);
  }
  return MismatchStatus(group, mine.sequence, field, pes, calls);
}

}  // namespace hyper_parallel::shmem
