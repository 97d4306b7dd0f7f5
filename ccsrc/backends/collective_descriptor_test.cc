#include "backends/collective_descriptor.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace hyper_parallel::shmem {
namespace {

CollectiveDescriptor AllGatherCall(std::uint64_t sequence, std::uint64_t bytes,
                                   std::uint64_t offset, std::string_view dtype = "float32") {
  CollectiveDescriptor d = CollectiveDescriptor::Of(
      "all_gather", data_plane::kAgreeBytes | data_plane::kAgreeDtype | data_plane::kAgreeOffset);
  d.sequence = sequence;
  d.bytes = bytes;
  d.offset = offset;
  d.SetDtype(dtype);
  return d;
}

// The Runtime's empty: bytes, alignment, offset and each PE's local outcome are compared.
CollectiveDescriptor EmptyCall() {
  return CollectiveDescriptor::Of("empty", data_plane::kAgreeBytes | data_plane::kAgreeAlignment |
                                               data_plane::kAgreeOffset | data_plane::kAgreeLocal);
}

CollectiveDescriptor Barrier(std::uint64_t sequence) {
  CollectiveDescriptor d = CollectiveDescriptor::Of("barrier", 0);
  d.sequence = sequence;
  return d;
}

TEST(CollectiveDescriptor, PacksAndUnpacksEveryField) {
  CollectiveDescriptor d = AllGatherCall(7, 4096, 0x1000, "float8_e4m3fnuz");
  d.alignment = 256;
  d.local = ErrorCode::kOutOfMemory;
  d.extra = {1, 2, 0xfedcba9876543210ull};
  const auto words = d.Pack();
  EXPECT_EQ(words[0], 7u) << "word 0 is the sequence number, published last";
  EXPECT_EQ(CollectiveDescriptor::Unpack(words), d);
  EXPECT_EQ(d.dtype_name(), "float8_e4m3fnuz");
}

TEST(CollectiveDescriptor, DtypeKeepsFifteenCharacters) {
  CollectiveDescriptor d;
  d.SetDtype("a_dtype_name_longer_than_fifteen");
  EXPECT_EQ(d.dtype_name(), "a_dtype_name_lo");
  d.SetDtype("int8");
  EXPECT_EQ(d.dtype_name(), "int8");
  d.SetDtype(std::string_view());
  EXPECT_EQ(d.dtype_name(), "");
}

TEST(CollectiveDescriptor, DescribeShowsWhatItsKindCompares) {
  EXPECT_EQ(Barrier(3).Describe(), "barrier #3");
  EXPECT_EQ(AllGatherCall(3, 64, 0x40).Describe(), "all_gather #3 bytes=64 dtype=float32 offset=0x40");
  CollectiveDescriptor empty = EmptyCall();
  empty.sequence = 1;
  empty.bytes = 100;
  empty.alignment = 64;
  empty.offset = 0;
  EXPECT_EQ(empty.Describe(), "empty #1 bytes=100 alignment=64 offset=0x0");
  CollectiveDescriptor close = CollectiveDescriptor::Of("close", 0);
  close.sequence = 9;
  close.extra = {5, 5, 77};
  EXPECT_EQ(close.Describe(), "close #9") << "the shutdown facts are the Runtime's to compare";
}

TEST(MatchDescriptors, AllAlikeMatch) {
  const CollectiveDescriptor mine = AllGatherCall(4, 128, 0x80);
  EXPECT_TRUE(MatchDescriptors(mine, {mine, mine, mine}).ok());
  CollectiveDescriptor close = CollectiveDescriptor::Of("close", 0);
  close.sequence = 2;
  CollectiveDescriptor other_close = close;
  other_close.extra = {3, 3, 4};
  other_close.local = ErrorCode::kInvalidState;
  EXPECT_TRUE(MatchDescriptors(close, {close, other_close}).ok())
      << "close compares kind and number only";
}

TEST(MatchDescriptors, KindMismatchNamesEveryCall) {
  const CollectiveDescriptor barrier = Barrier(3);
  const CollectiveDescriptor gather = AllGatherCall(3, 64, 0x40);
  const Status status = MatchDescriptors(gather, {barrier, gather});
  EXPECT_EQ(status.code(), ErrorCode::kCollectiveMismatch);
  EXPECT_EQ(status.message(),
            "collective calls differ across PEs (call: barrier on PE 0, all_gather on PE 1): "
            "sequence=3, field=kind, calls=pe 0: barrier #3; "
            "pe 1: all_gather #3 bytes=64 dtype=float32 offset=0x40");
  EXPECT_EQ(MatchDescriptors(barrier, {barrier, gather}).message(), status.message())
      << "every PE reports the same";
}

TEST(MatchDescriptors, EachComparedFieldIsNamed) {
  const CollectiveDescriptor base = AllGatherCall(5, 64, 0x40);
  struct Case {
    const char* field;
    CollectiveDescriptor other;
  };
  std::vector<Case> cases;
  cases.push_back({"bytes", AllGatherCall(5, 128, 0x40)});
  cases.push_back({"dtype", AllGatherCall(5, 64, 0x40, "int32")});
  cases.push_back({"offset", AllGatherCall(5, 64, 0x80)});
  cases.push_back({"sequence", AllGatherCall(6, 64, 0x40)});
  for (const Case& c : cases) {
    const Status status = MatchDescriptors(base, {base, base, c.other});
    EXPECT_EQ(status.code(), ErrorCode::kCollectiveMismatch) << c.field;
    EXPECT_NE(status.message().find(std::string("field=") + c.field), std::string::npos)
        << status.message();
    EXPECT_NE(status.message().find("pe 2: "), std::string::npos) << status.message();
  }
  CollectiveDescriptor empty = EmptyCall();
  empty.sequence = 1;
  empty.bytes = 64;
  empty.alignment = 64;
  empty.offset = 0;
  CollectiveDescriptor aligned = empty;
  aligned.alignment = 4096;
  EXPECT_NE(MatchDescriptors(empty, {empty, aligned}).message().find("field=alignment"),
            std::string::npos);
  CollectiveDescriptor failed = empty;
  failed.local = ErrorCode::kOutOfMemory;
  EXPECT_NE(MatchDescriptors(empty, {empty, failed}).message().find("field=local_outcome"),
            std::string::npos);
  CollectiveDescriptor free_call =
      CollectiveDescriptor::Of("free", data_plane::kAgreeBytes | data_plane::kAgreeOffset);
  free_call.sequence = 1;
  free_call.bytes = 64;
  free_call.offset = 0;
  CollectiveDescriptor free_aligned = free_call;
  free_aligned.alignment = 4096;  // not compared for free
  EXPECT_TRUE(MatchDescriptors(free_call, {free_call, free_aligned}).ok());
}

TEST(MatchDescriptors, ComparesAgainstPeZeroSoEveryPeNamesTheSameField) {
  const CollectiveDescriptor a = AllGatherCall(2, 64, 0x40);
  const CollectiveDescriptor b = AllGatherCall(2, 64, 0x80, "int32");
  // PE 1 differs from PE 0 in dtype (first compared) and offset: every PE says dtype.
  for (const CollectiveDescriptor& mine : {a, b}) {
    const Status status = MatchDescriptors(mine, {a, b});
    EXPECT_NE(status.message().find("field=dtype"), std::string::npos) << status.message();
  }
}

// Matching knows no collective: it compares the fields a descriptor declares, whatever its kind.
TEST(MatchDescriptors, ComparesExactlyTheDeclaredFieldsOfAnyKind) {
  CollectiveDescriptor mine = CollectiveDescriptor::Of("a_new_one", data_plane::kAgreeDtype);
  mine.sequence = 9;
  mine.SetDtype("bfloat16");
  mine.bytes = 64;
  CollectiveDescriptor other_bytes = mine;
  other_bytes.bytes = 128;  // not declared: may differ
  other_bytes.offset = 0x40;
  EXPECT_TRUE(MatchDescriptors(mine, {mine, other_bytes}).ok());
  CollectiveDescriptor other_dtype = mine;
  other_dtype.SetDtype("float16");
  const Status status = MatchDescriptors(mine, {mine, other_dtype});
  EXPECT_EQ(status.code(), ErrorCode::kCollectiveMismatch);
  EXPECT_EQ(status.message(),
            "collective calls differ across PEs (dtype: bfloat16 on PE 0, float16 on PE 1): "
            "sequence=9, field=dtype, calls=pe 0: a_new_one "
            "#9 dtype=bfloat16; pe 1: a_new_one #9 dtype=float16");
  // A peer that declares other fields for the same kind (another build) is named too.
  CollectiveDescriptor other_fields = mine;
  other_fields.fields = data_plane::kAgreeBytes;
  EXPECT_NE(MatchDescriptors(mine, {mine, other_fields}).message().find("field=fields"),
            std::string::npos);
}

// A reduction with its operator as argument 0, named as all_reduce names it.
class NamedOp final : public data_plane::Collective {
 public:
  std::string_view name() const override { return "named_op_test"; }
  Status Check(const data_plane::CollectiveCall&) const override { return Status::Ok(); }
  unsigned AgreedFields() const override { return data_plane::kAgreeArguments; }
  std::string_view ArgumentName(int index) const override { return index == 0 ? "op" : ""; }
  std::string ArgumentValue(int, std::int64_t value) const override {
    return value == 0 ? "sum" : "max";
  }
  Status Run(data_plane::KernelApi&, const data_plane::CollectivePlan&) const override {
    return Status::Ok();
  }
};

TEST(MatchDescriptors, ADifferenceReadsAsNamesAndValuesPerPe) {
  static const NamedOp op;
  NoteArgumentNames(op);
  std::vector<CollectiveDescriptor> calls(3, CollectiveDescriptor::Of("named_op_test",
                                                                    data_plane::kAgreeArguments));
  for (auto& call : calls) call.sequence = 4;
  calls[1].extra[0] = 1;
  const Status status = MatchDescriptors(calls[0], calls);
  EXPECT_EQ(status.code(), ErrorCode::kCollectiveMismatch);
  EXPECT_NE(status.message().find("(op: sum on PEs 0,2, max on PE 1)"), std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("pe 1: named_op_test #4 op=max"), std::string::npos)
      << status.message();
  // A dtype and a kind read alike; a kind nobody noted lists its arguments.
  std::vector<CollectiveDescriptor> gathers{AllGatherCall(2, 64, 0, "float32"),
                                            AllGatherCall(2, 64, 0, "int32")};
  EXPECT_NE(MatchDescriptors(gathers[0], gathers).message().find(
                "(dtype: float32 on PE 0, int32 on PE 1)"),
            std::string::npos);
  CollectiveDescriptor unnamed = CollectiveDescriptor::Of("unnamed_kind", data_plane::kAgreeArguments);
  unnamed.extra = {3, 0, 0};
  EXPECT_EQ(unnamed.Describe(), "unnamed_kind #0 arguments=[3,0,0]");
}

TEST(MatchDescriptors, ARefusalFailsEveryOtherCallNamingThePeAndItsReason) {
  const Status why = Status::Contract(ErrorCode::kInvalidArgument, "broadcast root",
                                      "a PE of the team, 0 to 1", "7");
  CollectiveDescriptor refusal = CollectiveDescriptor::Refusal("all_gather", why);
  refusal.sequence = 2;
  EXPECT_EQ(CollectiveDescriptor::Unpack(refusal.Pack()), refusal) << "the reason travels";
  EXPECT_FALSE(refusal.DecidedByCoreWords());
  const std::vector<CollectiveDescriptor> calls{refusal, AllGatherCall(2, 64, 0)};
  for (const CollectiveDescriptor& mine : calls) {
    const Status status = MatchDescriptors(mine, calls);
    EXPECT_EQ(status.code(), ErrorCode::kCollectiveMismatch);
    EXPECT_NE(status.message().find("all_gather was refused on PE 0: INVALID_ARGUMENT: "
                                    "broadcast root must be a PE of the team, 0 to 1, but got 7"),
              std::string::npos)
        << status.message();
  }
  // Across hosts the summary reaches the same verdict; refusals everywhere agree (each PE
  // reports its own reason), whatever the reasons say.
  DescriptorSummary summary(2);
  summary.Fold(calls[1], 1);
  summary.Fold(calls[0], 0);
  EXPECT_NE(summary.Conclude({}).verdict.message().find("was refused on PE 0"), std::string::npos);
  CollectiveDescriptor other = CollectiveDescriptor::Refusal(
      "all_gather", Status::Contract(ErrorCode::kInvalidArgument, "x", "y", "z"));
  other.sequence = 2;
  EXPECT_TRUE(MatchDescriptors(refusal, {refusal, other}).ok());
  DescriptorSummary both(2);
  both.Fold(refusal, 0);
  both.Fold(other, 1);
  EXPECT_TRUE(both.Conclude({}).verdict.ok());
  // A long reason is cut, marked where.
  const CollectiveDescriptor cut = CollectiveDescriptor::Refusal(
      "barrier", Status::Assertion(ErrorCode::kInvalidArgument, std::string(200, 'x')));
  EXPECT_EQ(cut.reason_text(), "INVALID_ARGUMENT: " + std::string(60, 'x') + "...");
}

TEST(CollectiveDescriptor, KindNamesRoundTripAndOnlyAlignmentLiesPastTheCoreWords) {
  const CollectiveDescriptor d = CollectiveDescriptor::Of("all_to_all", data_plane::kAgreeBytes);
  EXPECT_EQ(CollectiveDescriptor::Unpack(d.Pack()).kind_name(), "all_to_all");
  EXPECT_EQ(CollectiveDescriptor::Of("a_kind_longer_than_fifteen", 0).kind_name(),
            "a_kind_longer_t");
  EXPECT_EQ(CollectiveDescriptor{}.Describe(), "none #0");
  EXPECT_TRUE(d.DecidedByCoreWords());
  EXPECT_FALSE(EmptyCall().DecidedByCoreWords()) << "empty compares its alignment";
  // The core words hold every field but the alignment and close's facts.
  CollectiveDescriptor a = AllGatherCall(4, 64, 0x40);
  CollectiveDescriptor b = a;
  b.alignment = 4096;
  b.extra = {1, 2, 3};
  const auto wa = a.Pack(), wb = b.Pack();
  EXPECT_TRUE(std::equal(wa.begin(), wa.begin() + CollectiveDescriptor::kCoreWords, wb.begin()));
  b = a;
  b.SetDtype("int8");
  const auto wd = b.Pack();
  EXPECT_FALSE(std::equal(wa.begin(), wa.begin() + CollectiveDescriptor::kCoreWords, wd.begin()));
}

// The summary an agreement across hosts passes in rounds (DescriptorSummary).
DescriptorSummary SummaryOf(const std::vector<std::pair<int, CollectiveDescriptor>>& calls,
                            std::uint64_t sequence) {
  DescriptorSummary summary(sequence);
  for (const auto& [pe, call] : calls) summary.Fold(call, pe);
  return summary;
}

data_plane::CollectiveGroup WorldOf(int size) {
  auto pes = std::make_shared<std::vector<int>>();
  for (int pe = 0; pe < size; ++pe) pes->push_back(pe);
  return {pes, 0, 0};
}

TEST(DescriptorSummary, AgreeingCallsConcludeOkInAnyOrderAndAnyGrouping) {
  const CollectiveDescriptor call = AllGatherCall(4, 128, 0x80);
  DescriptorSummary left = SummaryOf({{0, call}, {1, call}}, 4);
  DescriptorSummary right = SummaryOf({{2, call}, {3, call}}, 4);
  DescriptorSummary both = left;
  both.Combine(right);
  both.Combine(left);  // a dissemination may deliver some PEs twice
  EXPECT_TRUE(both.Conclude(WorldOf(4)).verdict.ok());
  EXPECT_EQ(both.low_pe, 0);
  EXPECT_EQ(both.high_pe, 0) << "ties go to the lowest PE, so every PE ends the same";
  DescriptorSummary other = right;
  other.Combine(left);
  EXPECT_EQ(other.Pack(), both.Pack()) << "combining is commutative and idempotent";
}

TEST(DescriptorSummary, AMismatchNamesTheFieldAndBothCallsOnEveryPe) {
  const CollectiveDescriptor barrier = Barrier(3);
  const CollectiveDescriptor gather = AllGatherCall(3, 64, 0x40);
  // PE 5 calls all_gather, the others barrier; two PEs see the PEs in different groupings.
  DescriptorSummary a = SummaryOf({{0, barrier}, {1, barrier}, {5, gather}}, 3);
  a.Combine(SummaryOf({{2, barrier}, {3, barrier}, {4, barrier}}, 3));
  DescriptorSummary b = SummaryOf({{4, barrier}, {5, gather}}, 3);
  b.Combine(SummaryOf({{0, barrier}, {1, barrier}, {2, barrier}, {3, barrier}}, 3));
  const Status status = a.Conclude(WorldOf(6)).verdict;
  EXPECT_EQ(status.code(), ErrorCode::kCollectiveMismatch);
  EXPECT_EQ(status.message(),
            "collective calls differ across PEs (call: barrier on PE 0, all_gather on PE 5): "
            "sequence=3, field=kind, calls=pe 0: barrier #3; "
            "pe 5: all_gather #3 bytes=64 dtype=float32 offset=0x40");
  EXPECT_EQ(b.Conclude(WorldOf(6)).verdict.message(), status.message());
  // Each compared field is found; fields a kind does not compare are not.
  const CollectiveDescriptor base = AllGatherCall(5, 64, 0x40);
  for (const auto& [field, other] :
       std::vector<std::pair<std::string, CollectiveDescriptor>>{
           {"bytes", AllGatherCall(5, 128, 0x40)},
           {"dtype", AllGatherCall(5, 64, 0x40, "int32")},
           {"offset", AllGatherCall(5, 64, 0x80)}}) {
    const Status differs = SummaryOf({{0, base}, {1, other}}, 5).Conclude(WorldOf(2)).verdict;
    EXPECT_NE(differs.message().find("field=" + field), std::string::npos) << differs.message();
  }
  CollectiveDescriptor close = CollectiveDescriptor::Of("close", 0);
  close.sequence = 2;
  CollectiveDescriptor other_close = close;
  other_close.extra = {3, 3, 4};
  other_close.local = ErrorCode::kInvalidState;
  EXPECT_TRUE(SummaryOf({{0, close}, {1, other_close}}, 2).Conclude(WorldOf(2)).verdict.ok())
      << "close compares kind and number only";
}

TEST(DescriptorSummary, FactsMatchWhatEveryDescriptorSaysAndSurviveThePacking) {
  std::vector<CollectiveDescriptor> all;
  for (int pe = 0; pe < 12; ++pe) {
    CollectiveDescriptor close = CollectiveDescriptor::Of("close", 0);
    close.sequence = 7;
    close.local = pe % 2 == 1 ? ErrorCode::kInvalidState : ErrorCode::kOk;
    close.extra = {pe >= 2 ? 5u : 0u, 5, 0xabcdefull + (pe == 11 ? 1u : 0u)};
    all.push_back(close);
  }
  const Agreement from_all = Agreement::FromAll(all[0], all, nullptr);
  std::vector<std::pair<int, CollectiveDescriptor>> calls;
  for (int pe = 0; pe < 12; ++pe) calls.emplace_back(pe, all[pe]);
  const DescriptorSummary summary =
      DescriptorSummary::Unpack(SummaryOf(calls, 7).Pack());
  const Agreement rounds = summary.Conclude(WorldOf(12));
  for (const Agreement* agreement : {&from_all, &rounds}) {
    const DescriptorFacts& facts = agreement->facts;
    EXPECT_TRUE(agreement->verdict.ok());
    EXPECT_EQ(facts.not_ok, (std::vector<int>{1, 3, 5, 7, 9, 11}));
    EXPECT_FALSE(facts.not_ok_more);
    EXPECT_EQ(facts.holding, (std::vector<int>{2, 3, 4, 5, 6, 7, 8, 9})) << "the lowest 8";
    EXPECT_TRUE(facts.holding_more);
    EXPECT_FALSE(facts.Uniform(0));
    EXPECT_TRUE(facts.Uniform(1));
    EXPECT_FALSE(facts.Uniform(2));
    EXPECT_EQ(facts.extra_low[2], 0xabcdefull);
    EXPECT_EQ(facts.extra_high[2], 0xabcdf0ull);
  }
}

}  // namespace
}  // namespace hyper_parallel::shmem
