//===- UpdateRule.cpp - What a server's consistency decides ---------------===//

#include "UpdateRule.h"

#include <algorithm>

namespace tessera::runtime::ps {

int64_t UpdateRule::welcome(int64_t worker, const std::set<int64_t> &live,
                            int64_t version) {
  if (auto known = clocks.find(worker); known != clocks.end())
    return known->second;
  int64_t others = -1;
  for (int64_t other : live)
    if (other != worker && clocks.count(other))
      others = others < 0 ? clocks[other] : std::min(others, clocks[other]);
  int64_t clock = consistency.mode == plan::SYNC ? (others < 0 ? 0 : version)
                                                 : std::max<int64_t>(others, 0);
  clocks[worker] = clock;
  return clock;
}

void UpdateRule::advanceClock(int64_t worker, int64_t step) {
  int64_t &clock = clocks[worker];
  clock = std::max(clock, step);
}

bool UpdateRule::isRepeatedPush(int64_t worker) const {
  return consistency.mode == plan::SYNC &&
         std::any_of(
             pending.begin(), pending.end(),
             [&](const PushRecord &push) { return push.worker == worker; });
}

std::optional<Update> UpdateRule::takeUpdate(const std::set<int64_t> &live) {
  if (pending.empty())
    return std::nullopt;
  Update update;
  if (consistency.mode != plan::SYNC) {
    update.scale = static_cast<float>(workers);
  } else {
    for (int64_t worker : live)
      if (std::none_of(
              pending.begin(), pending.end(),
              [&](const PushRecord &push) { return push.worker == worker; }))
        return std::nullopt;
    update.scale = static_cast<float>(workers) / pending.size();
    std::sort(pending.begin(), pending.end(),
              [](const PushRecord &a, const PushRecord &b) {
                return a.worker < b.worker;
              });
  }
  update.pushes = std::move(pending);
  pending.clear();
  return update;
}

bool UpdateRule::mayPull(int64_t worker, const std::set<int64_t> &live) const {
  switch (consistency.mode) {
  case plan::SYNC:
    return !isRepeatedPush(worker);
  case plan::SSP:
    return getClock(worker) - getSlowestClock(live) <= consistency.staleness;
  default:
    return true;
  }
}

int64_t UpdateRule::getSlowestClock(const std::set<int64_t> &live) const {
  int64_t slowest = -1;
  for (int64_t worker : live)
    if (slowest < 0 || getClock(worker) < slowest)
      slowest = getClock(worker);
  return std::max<int64_t>(slowest, 0);
}

int64_t UpdateRule::getClock(int64_t worker) const {
  auto it = clocks.find(worker);
  return it == clocks.end() ? 0 : it->second;
}

} // namespace tessera::runtime::ps
