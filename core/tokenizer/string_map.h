// A hash map keyed by std::string that string_views can look up without
// building a string.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace pvllm {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

template <typename T>
using StringMap = std::unordered_map<std::string, T, StringHash, std::equal_to<>>;

}  // namespace pvllm
