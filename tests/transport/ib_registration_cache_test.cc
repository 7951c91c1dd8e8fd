// The registration cache of the ib transport (transports/ib/
// registration_cache.h) over a stand-in for ibv_reg_mr: ranges are
// registered once however many users ask, found by any sub-range, and
// deregistered with their last user or the cache.
#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "transports/ib/registration_cache.h"

namespace coil::transport::ib {
namespace {

std::set<ibv_mr*>& live() {
  static std::set<ibv_mr*> mrs;
  return mrs;
}
int registrations = 0;

ibv_mr* fakeRegMr(ibv_pd*, void* addr, size_t length, int) {
  auto* mr = new ibv_mr{};
  mr->addr = addr;
  mr->length = length;
  live().insert(mr);
  ++registrations;
  return mr;
}

int fakeDeregMr(ibv_mr* mr) {
  EXPECT_EQ(live().erase(mr), 1u) << "deregistered twice or never registered";
  delete mr;
  return 0;
}

VerbsApi fakeApi() {
  VerbsApi api{};
  api.regMr = &fakeRegMr;
  api.deregMr = &fakeDeregMr;
  return api;
}

TEST(RegistrationCache, RegistersOnceAndFindsSubRanges) {
  const VerbsApi api = fakeApi();
  registrations = 0;
  std::vector<char> a(1 << 20), b(4096);
  {
    RegistrationCache cache(api, nullptr);
    cache.add(a.data(), a.size());
    cache.add(a.data(), a.size());  // a second peer's connection: same region
    cache.add(b.data(), b.size());
    EXPECT_EQ(registrations, 2);
    EXPECT_EQ(cache.size(), 2u);
    ibv_mr* mr = cache.find(a.data() + 100, 1000);
    ASSERT_NE(mr, nullptr);
    EXPECT_EQ(mr->addr, a.data());
    EXPECT_EQ(cache.find(a.data(), a.size()), mr);
    EXPECT_EQ(cache.find(a.data() + 1, a.size()), nullptr);  // runs past the end
    EXPECT_EQ(cache.find(b.data(), b.size())->addr, b.data());
    EXPECT_TRUE(cache.remove(a.data(), a.size()));
    EXPECT_NE(cache.find(a.data(), 1), nullptr);  // one user left
    EXPECT_TRUE(cache.remove(a.data(), a.size()));
    EXPECT_EQ(cache.find(a.data(), 1), nullptr);
    EXPECT_FALSE(cache.remove(a.data(), a.size()));
    EXPECT_EQ(live().size(), 1u);
  }  // the cache deregisters what is left
  EXPECT_TRUE(live().empty());
}

TEST(RegistrationCache, ASecondSizeAtOneStartIsRefused) {
  const VerbsApi api = fakeApi();
  std::vector<char> a(8192);
  RegistrationCache cache(api, nullptr);
  cache.add(a.data(), 4096);
  try {
    cache.add(a.data(), 8192);
    ADD_FAILURE() << "accepted a second size";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), coilInvalidUsage);
  }
  EXPECT_FALSE(cache.remove(a.data(), 8192));
  EXPECT_TRUE(cache.remove(a.data(), 4096));
}

TEST(RegistrationCache, NestedRangesFindTheOneThatHoldsTheMessage) {
  const VerbsApi api = fakeApi();
  std::vector<char> a(1 << 16);
  RegistrationCache cache(api, nullptr);
  cache.add(a.data(), a.size());           // the whole buffer
  cache.add(a.data() + 4096, 4096);        // and a page inside it
  EXPECT_EQ(cache.find(a.data() + 4096, 4096)->addr, a.data() + 4096);
  EXPECT_EQ(cache.find(a.data() + 4096, 8192)->addr, a.data());  // only the outer holds it
  EXPECT_EQ(cache.find(a.data() + 60000, 100)->addr, a.data());
}

}  // namespace
}  // namespace coil::transport::ib
