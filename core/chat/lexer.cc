// The lexer (see lexer.h).
#include "core/chat/lexer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <utility>

namespace pvllm::chat {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(source) {
    // keep_trailing_newline=False: one final newline goes, "\r\n" whole.
    if (src_.ends_with("\r\n")) {
      src_.remove_suffix(2);
    } else if (!src_.empty() && src_.back() == '\n') {
      src_.remove_suffix(1);
    }
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    bool strip_next_text = false;  // the previous tag ended with '-'
    while (pos_ < src_.size()) {
      const size_t text_begin = pos_;
      size_t open = find_open(pos_);
      size_t text_end = open == std::string_view::npos ? src_.size() : open;
      size_t start = text_begin;
      if (strip_next_text) {
        while (start < text_end && is_space(src_[start])) ++start;
      }
      strip_next_text = false;
      if (open != std::string_view::npos) {
        const char kind = src_[open + 1];
        const char mod = open + 2 < src_.size() ? src_[open + 2] : '\0';
        if (mod == '-') {
          while (text_end > start && is_space(src_[text_end - 1])) --text_end;
        } else if (kind != '{' && mod != '+') {
          // lstrip_blocks: only spaces and tabs from the line's start.
          size_t run = text_end;
          while (run > start && (src_[run - 1] == ' ' || src_[run - 1] == '\t')) --run;
          if (run == 0 || src_[run - 1] == '\n') text_end = run;
        }
      }
      if (text_end > start) emit_text(std::string(src_.substr(start, text_end - start)), start);
      if (open == std::string_view::npos) break;
      strip_next_text = lex_tag(open);
    }
    tokens_.push_back(Token{TokenKind::kEnd, "", 0, 0.0, pos_at(src_.size())});
    return std::move(tokens_);
  }

 private:
  size_t find_open(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) {
        return i;
      }
    }
    return std::string_view::npos;
  }

  SourcePos pos_at(size_t offset) const {
    offset = std::min(offset, src_.size());
    const auto line = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    SourcePos p{static_cast<int>(line - line_starts_.begin()) + 1, 1};
    size_t from = *line;
    // Tokens come in order: count on from the previous position when it is
    // on the same line, so that a long line costs linear time, not
    // quadratic.
    if (last_offset_ >= *line && last_offset_ <= offset) {
      from = last_offset_;
      p.column = last_column_;
    }
    for (size_t i = from; i < offset; ++i) {
      if ((static_cast<unsigned char>(src_[i]) & 0xC0) != 0x80) ++p.column;
    }
    last_offset_ = offset;
    last_column_ = p.column;
    return p;
  }

  void emit(TokenKind kind, std::string text, size_t offset) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    t.pos = pos_at(offset);
    tokens_.push_back(std::move(t));
  }

  void emit_text(std::string text, size_t offset) {
    if (!tokens_.empty() && tokens_.back().kind == TokenKind::kText) {
      tokens_.back().text += text;
    } else {
      emit(TokenKind::kText, std::move(text), offset);
    }
  }

  // After a %} or #}: trim_blocks drops one newline. Returns the position.
  size_t after_block_close(size_t close_end) const {
    if (close_end < src_.size() && src_[close_end] == '\n') return close_end + 1;
    if (close_end + 1 < src_.size() && src_[close_end] == '\r' && src_[close_end + 1] == '\n') {
      return close_end + 2;
    }
    return close_end;
  }

  // Lexes the tag starting at `open`; returns whether it ended with '-'.
  bool lex_tag(size_t open) {
    const char kind = src_[open + 1];
    size_t p = open + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    if (kind == '#') {
      const size_t close = src_.find("#}", p);
      if (close == std::string_view::npos) unsupported("unclosed comment {#", pos_at(open));
      const bool strip = close > p && src_[close - 1] == '-';
      pos_ = strip ? close + 2 : after_block_close(close + 2);
      return strip;
    }
    const bool is_stmt = kind == '%';
    emit(is_stmt ? TokenKind::kStmtOpen : TokenKind::kExprOpen, is_stmt ? "{%" : "{{", open);
    const size_t first_token = tokens_.size();
    int depth = 0;  // open ( [ { inside the tag
    const char closer = is_stmt ? '%' : '}';
    for (;;) {
      while (p < src_.size() && is_space(src_[p])) ++p;
      if (p >= src_.size()) {
        unsupported(std::string("unclosed tag ") + (is_stmt ? "{%" : "{{"), pos_at(open));
      }
      const bool minus_close =
          src_[p] == '-' && src_.compare(p + 1, 2, std::string{closer, '}'}) == 0;
      const bool plain_close =
          src_.compare(p, 2, std::string{closer, '}'}) == 0 && (is_stmt || depth == 0);
      if (minus_close || plain_close) {
        const size_t close_end = p + (minus_close ? 3 : 2);
        emit(is_stmt ? TokenKind::kStmtClose : TokenKind::kExprClose, is_stmt ? "%}" : "}}", p);
        pos_ = (is_stmt && !minus_close) ? after_block_close(close_end) : close_end;
        if (is_stmt && is_raw_open(first_token)) {
          // {% raw -%} strips the body's leading whitespace, not the text
          // after {% endraw %}.
          lex_raw_body(minus_close);
          return false;
        }
        return minus_close;
      }
      p = lex_expression_token(p, &depth);
    }
  }

  bool is_raw_open(size_t first_token) const {
    return tokens_.size() == first_token + 2 && tokens_[first_token].kind == TokenKind::kName &&
           tokens_[first_token].text == "raw";
  }

  // After {% raw %}: everything up to {% endraw %} is text.
  void lex_raw_body(bool strip_start) {
    const size_t raw_open = tokens_.size() - 3;
    if (strip_start) {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    }
    for (size_t search = pos_;;) {
      const size_t open = src_.find("{%", search);
      if (open == std::string_view::npos)
        unsupported("{% raw %} without {% endraw %}", tokens_[raw_open].pos);
      size_t p = open + 2;
      const bool strip_before = p < src_.size() && src_[p] == '-';
      if (strip_before || (p < src_.size() && src_[p] == '+')) ++p;
      while (p < src_.size() && is_space(src_[p])) ++p;
      if (src_.compare(p, 6, "endraw") != 0) {
        search = open + 2;
        continue;
      }
      p += 6;
      while (p < src_.size() && is_space(src_[p])) ++p;
      const bool strip_after = p < src_.size() && src_[p] == '-';
      if (strip_after) ++p;
      if (src_.compare(p, 2, "%}") != 0) {
        search = open + 2;
        continue;
      }
      size_t text_end = open;
      if (strip_before) {
        while (text_end > pos_ && is_space(src_[text_end - 1])) --text_end;
      }
      // The raw tag's tokens go; its body is plain text.
      tokens_.resize(raw_open);
      if (text_end > pos_) emit_text(std::string(src_.substr(pos_, text_end - pos_)), pos_);
      pos_ = strip_after ? p + 2 : after_block_close(p + 2);
      if (strip_after) {
        while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
      }
      return;
    }
  }

  size_t lex_expression_token(size_t p, int* depth) {
    const char c = src_[p];
    if (is_name_start(c)) {
      size_t e = p;
      while (e < src_.size() && is_name_char(src_[e])) ++e;
      emit(TokenKind::kName, std::string(src_.substr(p, e - p)), p);
      return e;
    }
    if (is_digit(c)) return lex_number(p);
    if (c == '\'' || c == '"') return lex_string(p);
    static const char* const kTwo[] = {"**", "//", "==", "!=", "<=", ">="};
    for (const char* op : kTwo) {
      if (src_.compare(p, 2, op) == 0) {
        emit(TokenKind::kOp, op, p);
        return p + 2;
      }
    }
    if (std::string_view("+-*/%~<>()[]{}.,:|=").find(c) != std::string_view::npos) {
      if (c == '(' || c == '[' || c == '{') ++*depth;
      if (c == ')' || c == ']' || c == '}') --*depth;
      emit(TokenKind::kOp, std::string(1, c), p);
      return p + 1;
    }
    unsupported(std::string("unexpected character '") + c + "' in a tag", pos_at(p));
  }

  size_t lex_number(size_t p) {
    size_t e = p;
    while (e < src_.size() && (is_digit(src_[e]) || src_[e] == '_')) ++e;
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
      is_float = true;
      ++e;
      while (e < src_.size() && (is_digit(src_[e]) || src_[e] == '_')) ++e;
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t x = e + 1;
      if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
      if (x < src_.size() && is_digit(src_[x])) {
        is_float = true;
        e = x;
        while (e < src_.size() && is_digit(src_[e])) ++e;
      }
    }
    std::string text;
    for (size_t i = p; i < e; ++i) {
      if (src_[i] != '_') text += src_[i];
    }
    Token t;
    t.kind = is_float ? TokenKind::kFloat : TokenKind::kInt;
    t.text = text;
    t.pos = pos_at(p);
    if (is_float) {
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      t.int_value = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) unsupported("integer literal " + text + " is out of range", t.pos);
    }
    tokens_.push_back(std::move(t));
    return e;
  }

  size_t lex_string(size_t p) {
    const char quote = src_[p];
    std::string value;
    size_t i = p + 1;
    for (;; ++i) {
      if (i >= src_.size()) unsupported("unclosed string literal", pos_at(p));
      const char c = src_[i];
      if (c == quote) break;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (++i >= src_.size()) unsupported("unclosed string literal", pos_at(p));
      const char e = src_[i];
      switch (e) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'v':
          value += '\v';
          break;
        case '0':
          value += '\0';
          break;
        case '\\':
          value += '\\';
          break;
        case '\'':
          value += '\'';
          break;
        case '"':
          value += '"';
          break;
        case '\n':
          break;  // a line continuation
        case 'x':
        case 'u':
        case 'U': {
          const size_t len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (i + len >= src_.size())
            unsupported("bad \\" + std::string(1, e) + " escape", pos_at(i));
          const std::string hex(src_.substr(i + 1, len));
          if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
            unsupported("bad \\" + std::string(1, e) + " escape", pos_at(i));
          }
          append_utf8(static_cast<uint32_t>(std::strtoul(hex.c_str(), nullptr, 16)), &value);
          i += len;
          break;
        }
        default:  // Python keeps unknown escapes as they are
          value += '\\';
          value += e;
      }
    }
    emit(TokenKind::kString, std::move(value), p);
    return i + 1;
  }

  std::string_view src_;
  std::vector<size_t> line_starts_;  // offsets where each line begins
  // The last pos_at: its offset and column.
  mutable size_t last_offset_ = 0;
  mutable int last_column_ = 1;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace pvllm::chat
