//===- RendezvousTest.cpp - Ranks that meet over TCP ----------------------===//

#include "tessera/runtime/Rendezvous.h"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

using namespace tessera::runtime;

namespace {

/// A TCP port nothing listens on now.
int getFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

TEST(RendezvousTest, RanksMeetAndGather) {
  constexpr int kRanks = 4;
  int port = getFreePort();
  std::vector<std::string> errors(kRanks);
  std::vector<std::vector<std::vector<uint8_t>>> gathered(kRanks);
  std::vector<int> least(kRanks, -1);
  std::vector<std::thread> ranks;
  // Rank 0 comes last: the others retry until it listens.
  for (int rank = kRanks - 1; rank >= 0; --rank)
    ranks.emplace_back([&, rank] {
      Expected<std::unique_ptr<Rendezvous>> met =
          Rendezvous::connect("127.0.0.1", port, rank, kRanks, 20);
      if (!met.ok()) {
        errors[rank] = met.message();
        return;
      }
      std::vector<uint8_t> mine(rank + 1, static_cast<uint8_t>(rank));
      Status status = (*met)->allGather(mine, gathered[rank]);
      if (status.ok())
        status = (*met)->allReduceMin(10 + rank, least[rank]);
      if (!status.ok())
        errors[rank] = status.message();
    });
  for (std::thread &rank : ranks)
    rank.join();
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(errors[rank], "") << "rank " << rank;
    ASSERT_EQ(gathered[rank].size(), size_t(kRanks));
    for (int other = 0; other < kRanks; ++other)
      EXPECT_EQ(gathered[rank][other],
                std::vector<uint8_t>(other + 1, static_cast<uint8_t>(other)));
    EXPECT_EQ(least[rank], 10);
  }
}

TEST(RendezvousTest, NamesTheRanksThatNeverCome) {
  Expected<std::unique_ptr<Rendezvous>> alone =
      Rendezvous::connect("127.0.0.1", getFreePort(), 0, 3, 0.2);
  ASSERT_FALSE(alone.ok());
  EXPECT_EQ(alone.message().rfind("1 of 3 ranks came to the rendezvous at "
                                  "port ",
                                  0),
            0u)
      << alone.message();
  EXPECT_NE(alone.message().find("missing: ranks 1, 2"), std::string::npos)
      << alone.message();
  Expected<std::unique_ptr<Rendezvous>> noRankZero =
      Rendezvous::connect("127.0.0.1", getFreePort(), 1, 2, 0.2);
  ASSERT_FALSE(noRankZero.ok());
  EXPECT_NE(noRankZero.message().find("no rendezvous with rank 0 at "
                                      "127.0.0.1:"),
            std::string::npos)
      << noRankZero.message();
}

TEST(RendezvousTest, RefusesARankOfAnotherWorldSize) {
  int port = getFreePort();
  std::string zero, one;
  std::thread rankZero([&] {
    Expected<std::unique_ptr<Rendezvous>> met =
        Rendezvous::connect("127.0.0.1", port, 0, 2, 10);
    zero = met.ok() ? "" : met.message();
  });
  std::thread rankOne([&] {
    Expected<std::unique_ptr<Rendezvous>> met =
        Rendezvous::connect("127.0.0.1", port, 1, 3, 10);
    one = met.ok() ? "" : met.message();
  });
  rankZero.join();
  rankOne.join();
  EXPECT_EQ(zero, "rank 1 came to the rendezvous as one of 3 ranks, expected "
                  "a rank from 1 to 1 not yet there, of 2: do all ranks have "
                  "the same WORLD_SIZE and distinct RANKs?");
  EXPECT_EQ(one, "the rendezvous at 127.0.0.1:" + std::to_string(port) +
                     " failed at rank 0 (see its error)");
}

TEST(RendezvousTest, ReadsTorchrunVariables) {
  ::setenv("WORLD_SIZE", "4", 1);
  ::setenv("RANK", "2", 1);
  ::setenv("LOCAL_RANK", "0", 1);
  ::setenv("MASTER_ADDR", "node0", 1);
  ::setenv("MASTER_PORT", "29500", 1);
  Expected<TorchrunEnvironment> environment = getTorchrunEnvironment();
  ASSERT_TRUE(environment.ok()) << environment.message();
  EXPECT_EQ(environment->rank, 2);
  EXPECT_EQ(environment->size, 4);
  EXPECT_EQ(environment->localRank, 0);
  EXPECT_EQ(environment->host, "node0");
  EXPECT_EQ(environment->port, 29500);
  ::setenv("MASTER_PORT", "http", 1);
  EXPECT_EQ(getTorchrunEnvironment().message(),
            "MASTER_PORT='http' is not an integer from 1 to 65535");
  ::unsetenv("MASTER_PORT");
  EXPECT_EQ(getTorchrunEnvironment().message(),
            "WORLD_SIZE=4 says a torchrun-style launcher started this "
            "process, but MASTER_PORT is not set (each rank needs RANK, "
            "WORLD_SIZE, MASTER_ADDR and MASTER_PORT)");
  ::setenv("WORLD_SIZE", "1", 1);
  EXPECT_EQ(getTorchrunEnvironment()->size, 1);
  for (const char *name :
       {"WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"})
    ::unsetenv(name);
}

} // namespace
