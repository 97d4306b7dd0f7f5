#include "backends/collective.h"

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
            "collective calls differ across PEs: sequence=3, field=kind, calls=pe 0: barrier #3; "
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
            "collective calls differ across PEs: sequence=9, field=dtype, calls=pe 0: a_new_one "
            "#9 dtype=bfloat16; pe 1: a_new_one #9 dtype=float16");
  // A peer that declares other fields for the same kind (another build) is named too.
  CollectiveDescriptor other_fields = mine;
  other_fields.fields = data_plane::kAgreeBytes;
  EXPECT_NE(MatchDescriptors(mine, {mine, other_fields}).message().find("field=fields"),
            std::string::npos);
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

}  // namespace
}  // namespace hyper_parallel::shmem
