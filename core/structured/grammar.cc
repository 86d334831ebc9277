#include "core/structured/grammar.h"

#include <algorithm>

namespace pvllm::structured {

bool CharSet::contains(uint32_t c) const {
  if (c < 128) return (ascii[c >> 6] >> (c & 63)) & 1;
  auto it = std::upper_bound(ranges.begin(), ranges.end(), c,
                             [](uint32_t v, const CharRange& r) { return v < r.lo; });
  return it != ranges.begin() && c <= std::prev(it)->hi;
}

bool CharSet::intersects(uint32_t lo, uint32_t hi) const {
  for (const CharRange& r : ranges) {
    if (r.lo > hi) return false;
    if (r.hi >= lo) return true;
  }
  return false;
}

bool CharSet::covers(uint32_t lo, uint32_t hi) const {
  for (const CharRange& r : ranges) {
    if (r.lo > lo) return false;
    if (r.hi >= lo) return r.hi >= hi;
  }
  return false;
}

}  // namespace pvllm::structured
