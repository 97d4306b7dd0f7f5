#include "base/log.h"

#include <gtest/gtest.h>

#include <regex>
#include <vector>

namespace hyper_parallel::shmem {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    log::SetSink([this](std::string_view line) { lines_.emplace_back(line); });
  }
  void TearDown() override {
    log::SetSink(nullptr);
    log::SetLevel(LogLevel::kError);
    log::SetRank(-1);
  }
  std::vector<std::string> lines_;
};

TEST_F(LogTest, LineCarriesRankLevelTimeAndLocation) {
  log::SetRank(3);
  HPS_LOG_ERROR("something broke: id=7");
  ASSERT_EQ(lines_.size(), 1u);
  const std::regex shape(
      R"(\[HYPER_PARALLEL_SHMEM\] \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z rank=3 level=ERROR log_test\.cc:\d+ something broke: id=7)");
  EXPECT_TRUE(std::regex_match(lines_[0], shape)) << lines_[0];
}

TEST_F(LogTest, LevelFilters) {
  log::SetLevel(LogLevel::kError);
  HPS_LOG_DEBUG("hidden");
  HPS_LOG_INFO("hidden");
  EXPECT_TRUE(lines_.empty());
  log::SetLevel(LogLevel::kDebug);
  HPS_LOG_DEBUG("shown");
  HPS_LOG_INFO("shown");
  EXPECT_EQ(lines_.size(), 2u);
}

TEST_F(LogTest, FormattingSkippedWhenDisabled) {
  int evaluations = 0;
  auto text = [&] {
    ++evaluations;
    return std::string("x");
  };
  HPS_LOG_DEBUG(text());
  EXPECT_EQ(evaluations, 0);
}

TEST_F(LogTest, LinesAreBoundedAndSingle) {
  HPS_LOG_ERROR(std::string(5000, 'a') + "\nsecond line");
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_EQ(lines_[0].size(), log::kMaxLineBytes);
  EXPECT_EQ(lines_[0].substr(lines_[0].size() - 3), "...");
  EXPECT_EQ(lines_[0].find('\n'), std::string::npos);
}

TEST_F(LogTest, UnknownRankPrintsQuestionMark) {
  log::SetRank(-1);
  HPS_LOG_ERROR("before init");
  ASSERT_EQ(lines_.size(), 1u);
  EXPECT_NE(lines_[0].find(" rank=? "), std::string::npos);
}

}  // namespace
}  // namespace hyper_parallel::shmem
