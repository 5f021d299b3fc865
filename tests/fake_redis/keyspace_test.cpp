#include "fake_redis/keyspace.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

namespace turnstile::sim {
namespace {

class KeyspaceTest : public ::testing::Test {
 protected:
  void advance_ms(std::int64_t ms) { clock_.advance_by(std::chrono::milliseconds(ms)); }
  VirtualClock clock_;
  Keyspace keyspace_{clock_};
};

TEST_F(KeyspaceTest, KeyLivesThroughItsDeadlineMillisecondAndIsGoneAfter) {
  keyspace_.set("k", std::string("v"));
  ASSERT_TRUE(keyspace_.set_deadline_ms("k", 100));
  advance_ms(100);
  EXPECT_NE(keyspace_.find("k"), nullptr);  // Redis: expired only when now > deadline
  clock_.advance_by(std::chrono::microseconds(999));
  EXPECT_NE(keyspace_.find("k"), nullptr);  // still millisecond 100
  clock_.advance_by(std::chrono::microseconds(1));
  EXPECT_EQ(keyspace_.find("k"), nullptr);
  EXPECT_FALSE(keyspace_.deadline_ms("k"));
  EXPECT_FALSE(keyspace_.type("k"));
}

TEST_F(KeyspaceTest, ExpiredKeyIsGoneForTypedLookupsAndCanBeRecreated) {
  keyspace_.set("k", std::string("v"));
  keyspace_.set_deadline_ms("k", 10);
  advance_ms(11);
  Typed<Hash> hash = keyspace_.find_as<Hash>("k");
  EXPECT_FALSE(hash.wrong_type);  // the old string is gone, not in the way
  Typed<Hash> created = keyspace_.find_or_create<Hash>("k");
  ASSERT_NE(created.value, nullptr);
  created.value->set("f", "v");
  EXPECT_EQ(keyspace_.type("k"), ValueType::hash);
  EXPECT_FALSE(keyspace_.deadline_ms("k"));
}

TEST_F(KeyspaceTest, EraseExpiredDropsOnlyExpiredKeys) {
  keyspace_.set("short", std::string("v"));
  keyspace_.set("long", std::string("v"));
  keyspace_.set("forever", std::string("v"));
  keyspace_.set_deadline_ms("short", 5);
  keyspace_.set_deadline_ms("long", 500);
  advance_ms(6);
  EXPECT_EQ(keyspace_.erase_expired(), 1u);
  EXPECT_EQ(keyspace_.size(), 2u);
}

TEST_F(KeyspaceTest, WrongTypeLookupDoesNotTouchTheValue) {
  keyspace_.set("k", std::string("v"));
  Typed<SortedSet> set = keyspace_.find_or_create<SortedSet>("k");
  EXPECT_TRUE(set.wrong_type);
  EXPECT_EQ(set.value, nullptr);
  EXPECT_EQ(*std::get_if<std::string>(keyspace_.find("k")), "v");
}

TEST_F(KeyspaceTest, SetClearsDeadlineButReplaceKeepsIt) {
  keyspace_.set("k", std::string("v"));
  keyspace_.set_deadline_ms("k", 50);
  keyspace_.replace_keep_deadline("k", std::string("w"));
  EXPECT_EQ(keyspace_.deadline_ms("k"), 50);
  keyspace_.set("k", std::string("x"));
  EXPECT_FALSE(keyspace_.deadline_ms("k"));
}

TEST_F(KeyspaceTest, HugeAndBinaryKeysAndValues) {
  const std::string key(1 << 20, '\0');
  const std::string value = std::string(1 << 22, '\xff') + std::string("\0tail", 5);
  keyspace_.set(key, value);
  EXPECT_EQ(*std::get_if<std::string>(keyspace_.find(key)), value);
  EXPECT_EQ(keyspace_.find(std::string(1 << 20, '\1')), nullptr);
}

TEST_F(KeyspaceTest, EmptyAggregatesAreRemoved) {
  keyspace_.find_or_create<List>("l");
  keyspace_.erase_if_empty("l");
  EXPECT_EQ(keyspace_.find("l"), nullptr);
  keyspace_.set("s", std::string());
  keyspace_.erase_if_empty("s");  // an empty string is a value
  EXPECT_NE(keyspace_.find("s"), nullptr);
}

// Lookups remember the last keys' entries (Keyspace::RecentKeys): what they
// find must stay right across erasures, re-creations, the rehashes that
// many insertions cause, and copies of the keyspace.
TEST_F(KeyspaceTest, RememberedKeysStayRightAcrossErasuresRehashesAndCopies) {
  keyspace_.set("a", std::string("1"));
  keyspace_.set("b", std::string("2"));
  ASSERT_EQ(std::get<std::string>(*keyspace_.find("a")), "1");
  ASSERT_EQ(std::get<std::string>(*keyspace_.find("b")), "2");
  ASSERT_TRUE(keyspace_.erase("a"));
  EXPECT_EQ(keyspace_.find("a"), nullptr);
  keyspace_.set("a", std::string("3"));
  EXPECT_EQ(std::get<std::string>(*keyspace_.find("a")), "3");
  for (int i = 0; i < 1000; ++i) {
    keyspace_.set("key:" + std::to_string(i), std::to_string(i));
    ASSERT_EQ(std::get<std::string>(*keyspace_.find("b")), "2") << "after " << i << " insertions";
  }
  for (int i = 0; i < 1000; i += 7) {
    ASSERT_EQ(std::get<std::string>(*keyspace_.find("key:" + std::to_string(i))), std::to_string(i));
  }
  ASSERT_TRUE(keyspace_.set_deadline_ms("b", 5));
  advance_ms(6);
  EXPECT_EQ(keyspace_.find("b"), nullptr);
  EXPECT_EQ(keyspace_.erase_expired(), 0U);
  keyspace_.find_or_create<Hash>("b").value->set("f", "v");
  EXPECT_EQ(*std::get<Hash>(*keyspace_.find("b")).find("f"), "v");

  Keyspace copy = keyspace_;
  copy.set("a", std::string("copy"));
  EXPECT_EQ(std::get<std::string>(*keyspace_.find("a")), "3");
  EXPECT_EQ(std::get<std::string>(*copy.find("a")), "copy");
  keyspace_.clear();
  EXPECT_EQ(keyspace_.find("a"), nullptr);
  EXPECT_EQ(std::get<std::string>(*copy.find("a")), "copy");
}

TEST(HashTest, KeepsInsertionOrderAcrossUpdatesAndDeletes) {
  Hash hash;
  EXPECT_TRUE(hash.set("a", "1"));
  EXPECT_TRUE(hash.set("b", "2"));
  EXPECT_TRUE(hash.set("c", "3"));
  EXPECT_FALSE(hash.set("a", "9"));
  EXPECT_TRUE(hash.erase("b"));
  EXPECT_FALSE(hash.erase("b"));
  EXPECT_TRUE(hash.set("b", "4"));
  std::vector<Hash::Entry> entries(hash.entries().begin(), hash.entries().end());
  EXPECT_EQ(entries, (std::vector<Hash::Entry>{{"a", "9"}, {"c", "3"}, {"b", "4"}}));
  EXPECT_EQ(*hash.find("a"), "9");
  EXPECT_EQ(hash.find("zz"), nullptr);
}

// A copy indexes its own fields: the AOF's and replication's key snapshots
// copy hashes, then edit the copy after the original changed or is gone.
TEST(HashTest, ACopyIndexesItsOwnFields) {
  auto original = std::make_unique<Hash>();
  original->set("a", "1");
  original->set("b", "2");
  Hash copy = *original;
  EXPECT_FALSE(copy.set("a", "9"));
  ASSERT_EQ(*original->find("a"), "1") << "the copy's update left the original alone";
  std::vector<Hash::Entry> entries(copy.entries().begin(), copy.entries().end());
  ASSERT_EQ(entries, (std::vector<Hash::Entry>{{"a", "9"}, {"b", "2"}})) << "and changed the copy";
  EXPECT_TRUE(copy.erase("a"));
  EXPECT_EQ(original->size(), 2u);
  original.reset();
  EXPECT_TRUE(copy.set("c", "3"));
  EXPECT_EQ(*copy.find("b"), "2");
  Hash assigned;
  assigned.set("z", "0");
  assigned = copy;
  copy = Hash();
  EXPECT_TRUE(assigned.erase("b"));
  EXPECT_EQ(assigned.find("z"), nullptr);
  entries.assign(assigned.entries().begin(), assigned.entries().end());
  EXPECT_EQ(entries, (std::vector<Hash::Entry>{{"c", "3"}}));
}

TEST(SortedSetTest, OrdersByScoreThenMemberAndMovesOnUpdate) {
  SortedSet set;
  EXPECT_TRUE(set.set("b", 1));
  EXPECT_TRUE(set.set("a", 1));
  EXPECT_TRUE(set.set("c", 0.5));
  EXPECT_FALSE(set.set("c", 2));
  std::vector<std::string> members;
  for (const auto& [score, member] : set.by_score()) members.push_back(member);
  EXPECT_EQ(members, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_EQ(set.rank("c"), 2u);
  EXPECT_EQ(set.score("c"), 2);
  EXPECT_TRUE(set.erase("a"));
  EXPECT_EQ(set.rank("b"), 0u);
  EXPECT_FALSE(set.score("a"));
}

TEST(SortedSetTest, SmallSetStoresNegativeZeroAsZeroLikeAListpack) {
  SortedSet set;
  set.set("m", -0.0);
  EXPECT_FALSE(std::signbit(*set.score("m")));
  SortedSet big;
  big.set(std::string(kListpackMaxValueBytes + 1, 'x'), 1);  // converts to a skiplist
  big.set("m", -0.0);
  EXPECT_TRUE(std::signbit(*big.score("m")));
}

}  // namespace
}  // namespace turnstile::sim
