// JSON <-> Value.
#include "core/chat/json_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/chat/error.h"

namespace pvllm::chat {

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::floating(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::floating(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json(item));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), from_json(it.value()));
      return Value::dict(std::move(d));
    }
    default:
      invalid("JSON value of type " + std::string(j.type_name()) + " cannot be used in a template");
  }
}

namespace {

void append_json_string(const std::string& s, std::string* out) {
  *out += '"';
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          *out += ch;
        }
    }
  }
  *out += '"';
}

void write(const Value& v, int indent, bool sort_keys, int depth, std::string* out) {
  const std::string item_sep = indent >= 0 ? "," : ", ";
  std::string pad;
  std::string child_pad;
  if (indent >= 0) {
    pad.assign(1, '\n').append(static_cast<size_t>(indent) * depth, ' ');
    child_pad.assign(pad).append(static_cast<size_t>(indent), ' ');
  }
  switch (v.kind()) {
    case Value::Kind::kNone:
      *out += "null";
      return;
    case Value::Kind::kBool:
      *out += v.as_bool() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      *out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat: {
      const double d = v.as_double();
      if (std::isnan(d)) {
        *out += "NaN";
      } else if (std::isinf(d)) {
        *out += d > 0 ? "Infinity" : "-Infinity";
      } else {
        *out += format_float(d);
      }
      return;
    }
    case Value::Kind::kString:
      append_json_string(v.as_string(), out);
      return;
    case Value::Kind::kList: {
      const List& items = v.as_list();
      if (items.empty()) {
        *out += "[]";
        return;
      }
      *out += "[";
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) *out += item_sep;
        *out += child_pad;
        write(items[i], indent, sort_keys, depth + 1, out);
      }
      *out += pad + "]";
      return;
    }
    case Value::Kind::kDict: {
      auto entries = v.as_dict().entries;
      if (entries.empty()) {
        *out += "{}";
        return;
      }
      if (sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      *out += "{";
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) *out += item_sep;
        *out += child_pad;
        append_json_string(entries[i].first, out);
        *out += ": ";
        write(entries[i].second, indent, sort_keys, depth + 1, out);
      }
      *out += pad + "}";
      return;
    }
    default:
      invalid("tojson: a value of type " + v.type_name() + " is not JSON serializable");
  }
}

}  // namespace

std::string to_json(const Value& v, int indent, bool sort_keys) {
  std::string out;
  write(v, indent, sort_keys, 0, &out);
  return out;
}

}  // namespace pvllm::chat
