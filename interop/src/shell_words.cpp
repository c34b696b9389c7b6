#include "shell_words.hpp"

#include <cctype>
#include <charconv>
#include <cstddef>
#include <map>
#include <optional>
#include <string_view>

#include "tetra/base/error.hpp"

namespace tetra::interop::detail {
namespace {

// A token as written: a word (quotes kept, expanded later, once the variables it reads are
// known), "(" / ")" around an array, or the end of a statement (newline, ';').
struct Token {
  enum Kind { word, open, close, end } kind = word;
  std::string raw;
  int line = 0;
};

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

/// Integers the reader computes with stay within ±2^61, so a sum of two is exact.
constexpr long long kShellIntLimit = 1LL << 61;

/// A decimal integer with an optional sign, as the whole of `word`; nothing otherwise or
/// beyond kShellIntLimit.
std::optional<long long> shell_integer(std::string_view word) {
  if (!word.empty() && word.front() == '+') word.remove_prefix(1);
  long long v = 0;
  const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), v);
  if (word.empty() || ec != std::errc{} || end != word.data() + word.size()) return std::nullopt;
  if (v > kShellIntLimit || v < -kShellIntLimit) return std::nullopt;
  return v;
}

// Copies a balanced $(...) or ${...} group starting at text[i] (the '(' or '{') into `raw`.
std::size_t copy_group(std::string_view text, std::size_t i, std::string& raw, int& line) {
  const char open = text[i];
  const char close = open == '(' ? ')' : '}';
  int depth = 0;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    raw += c;
    if (c == '\n') ++line;
    if (c == open) ++depth;
    if (c == close && --depth == 0) return i + 1;
  }
  return i;
}

std::vector<Token> tokenize(std::string_view text) {
  std::vector<Token> out;
  std::string raw;
  bool in_word = false;
  int line = 1;
  int word_line = 1;
  auto flush = [&] {
    if (in_word) out.push_back({Token::word, raw, word_line});
    raw.clear();
    in_word = false;
  };
  auto start = [&] {
    if (!in_word) word_line = line;
    in_word = true;
  };
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {  // line continuation
      flush();
      ++line;
      i += 2;
    } else if (c == '\\' && i + 1 < text.size()) {
      start();
      raw += text.substr(i, 2);
      i += 2;
    } else if (c == '\n' || c == ';') {
      flush();
      out.push_back({Token::end, "", line});
      if (c == '\n') ++line;
      ++i;
    } else if (c == ' ' || c == '\t' || c == '\r') {
      flush();
      ++i;
    } else if (c == '#' && !in_word) {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == '\'' || c == '"') {
      start();
      raw += c;
      for (++i; i < text.size() && text[i] != c; ++i) {
        if (c == '"' && text[i] == '\\' && i + 1 < text.size()) raw += text[i++];
        if (text[i] == '\n') ++line;
        raw += text[i];
      }
      raw += c;
      ++i;
    } else if (c == '$' && i + 1 < text.size() && (text[i + 1] == '(' || text[i + 1] == '{')) {
      start();
      raw += c;
      i = copy_group(text, i + 1, raw, line);
    } else if (c == '(' || c == ')') {
      const bool array_open = c == '(' && in_word && !raw.empty() && raw.back() == '=';
      if (!array_open && in_word && c == '(') {  // a function name or a pattern: keep it
        raw += c;
        ++i;
        continue;
      }
      flush();
      out.push_back({c == '(' ? Token::open : Token::close, std::string(1, c), line});
      ++i;
    } else {
      start();
      raw += c;
      ++i;
    }
  }
  flush();
  return out;
}

// A variable: a scalar is an array of one element.
struct Element {
  std::string text;
  int line = 0;
  std::string unresolved;
};
using Variables = std::map<std::string, std::vector<Element>, std::less<>>;

// The words a raw word expands to: quotes removed, variables replaced, unquoted expansions
// split at blanks.
class Expander {
 public:
  /// `used` counts the bytes every expansion of the file produced, against kMaxExpandedBytes.
  Expander(const Variables& vars, const std::string& path, std::size_t& used)
      : vars_(vars), path_(path), used_(used) {}

  std::vector<ShellWord> expand(const std::string& raw, int line, bool split = true) {
    words_.clear();
    cur_ = {};
    exists_ = false;
    line_ = line;
    std::size_t i = 0;
    while (i < raw.size()) {
      const char c = raw[i];
      if (c == '\'') {
        const std::size_t e = raw.find('\'', i + 1);
        append(raw.substr(i + 1, (e == std::string::npos ? raw.size() : e) - i - 1), false);
        exists_ = true;
        i = e == std::string::npos ? raw.size() : e + 1;
      } else if (c == '"') {
        exists_ = true;
        for (++i; i < raw.size() && raw[i] != '"';) {
          if (raw[i] == '\\' && i + 1 < raw.size()) {
            append(std::string(1, raw[i + 1]), false);
            i += 2;
          } else if (raw[i] == '$') {
            i = dollar(raw, i, false);
          } else {
            append(std::string(1, raw[i++]), false);
          }
        }
        ++i;
      } else if (c == '\\' && i + 1 < raw.size()) {
        append(std::string(1, raw[i + 1]), false);
        i += 2;
      } else if (c == '$') {
        i = dollar(raw, i, split);
      } else {
        append(std::string(1, c), false);
        ++i;
      }
    }
    finish();
    return words_;
  }

 private:
  void append(const std::string& s, bool split, const std::string& unresolved = {}) {
    if (!unresolved.empty() && cur_.unresolved.empty()) cur_.unresolved = unresolved;
    for (const char c : s) {
      if (split && (c == ' ' || c == '\t' || c == '\n')) {
        finish();
        continue;
      }
      cur_.text += c;
      exists_ = true;
      if (++used_ > kMaxExpandedBytes) {
        throw UserError(SourceLocation{path_, line_}, "",
                        "the script expands to more than " + std::to_string(kMaxExpandedBytes) + " bytes");
      }
    }
  }
  // The integer value of the body of a `$(( ))` over the variables the file sets (bash's
  // arithmetic: + - * / % and parentheses on 64-bit integers, names with or without `$`);
  // nothing when a name is unset or not an integer, or on a division by zero, an overflow or a
  // form outside that subset.
  std::optional<long long> arithmetic_value(const std::string& body) {
    if (arithmetic_depth_ >= kMaxArithmeticNesting) return std::nullopt;
    Expander inner(vars_, path_, used_);
    inner.arithmetic_depth_ = arithmetic_depth_ + 1;
    std::string text;
    for (const auto& w : inner.expand(body, line_, false)) {
      if (!w.unresolved.empty()) return std::nullopt;
      text += w.text;
    }
    Arithmetic a{text, vars_};
    const auto v = a.sum(0);
    a.blank();
    if (!v || a.at != text.size()) return std::nullopt;
    return v;
  }

  // Recursive descent over one `$(( ))` body; depth bounds the nesting of parentheses.
  struct Arithmetic {
    const std::string& text;
    const Variables& vars;
    std::size_t at = 0;
    static constexpr int kMaxDepth = 64;

    void blank() {
      while (at < text.size() && (text[at] == ' ' || text[at] == '\t' || text[at] == '\n')) ++at;
    }
    static std::optional<long long> checked(long long v) {
      if (v > kShellIntLimit || v < -kShellIntLimit) return std::nullopt;
      return v;
    }
    std::optional<long long> sum(int depth) {
      auto left = product(depth);
      while (left) {
        blank();
        if (at >= text.size() || (text[at] != '+' && text[at] != '-')) break;
        const char op = text[at++];
        const auto right = product(depth);
        if (!right) return std::nullopt;
        left = checked(op == '+' ? *left + *right : *left - *right);
      }
      return left;
    }
    std::optional<long long> product(int depth) {
      auto left = unary(depth);
      while (left) {
        blank();
        if (at >= text.size() || (text[at] != '*' && text[at] != '/' && text[at] != '%')) break;
        const char op = text[at++];
        if (op == '*' && at < text.size() && text[at] == '*') return std::nullopt;  // ** not read
        const auto right = unary(depth);
        if (!right) return std::nullopt;
        if (op == '*') {
          long long p = 0;
          if (__builtin_mul_overflow(*left, *right, &p)) return std::nullopt;
          left = checked(p);
        } else if (*right == 0) {
          return std::nullopt;
        } else {
          left = op == '/' ? *left / *right : *left % *right;
        }
      }
      return left;
    }
    std::optional<long long> unary(int depth) {
      blank();
      if (at < text.size() && (text[at] == '-' || text[at] == '+')) {
        if (depth > kMaxDepth) return std::nullopt;
        const char op = text[at++];
        const auto v = unary(depth + 1);
        if (!v) return std::nullopt;
        return op == '-' ? -*v : *v;
      }
      return primary(depth);
    }
    std::optional<long long> primary(int depth) {
      blank();
      if (at >= text.size() || depth > kMaxDepth) return std::nullopt;
      if (text[at] == '(') {
        ++at;
        const auto v = sum(depth + 1);
        blank();
        if (!v || at >= text.size() || text[at] != ')') return std::nullopt;
        ++at;
        return v;
      }
      const std::size_t start = at;
      while (at < text.size() && is_name_char(text[at])) ++at;
      if (at == start) return std::nullopt;
      std::string word = text.substr(start, at - start);
      if (std::isdigit(static_cast<unsigned char>(word[0])) == 0) {  // a variable's value
        const auto it = vars.find(word);
        if (it == vars.end() || it->second.size() != 1 || !it->second.front().unresolved.empty()) {
          return std::nullopt;
        }
        word = it->second.front().text;
      }
      return shell_integer(word);
    }
  };

  static constexpr int kMaxArithmeticNesting = 8;  ///< `$(( $(( ... )) ))` levels evaluated
  int arithmetic_depth_ = 0;

  void finish() {
    if (exists_) {
      cur_.line = line_;
      words_.push_back(std::move(cur_));
    }
    cur_ = {};
    exists_ = false;
  }

  // Expands the `$...` at raw[i]; returns the index after it.
  std::size_t dollar(const std::string& raw, std::size_t i, bool split) {
    if (i + 1 >= raw.size()) {
      append("$", false);
      return i + 1;
    }
    if (raw[i + 1] == '(') {  // command substitution (not run) or arithmetic
      int depth = 0;
      std::size_t j = i + 1;
      for (; j < raw.size(); ++j) {
        if (raw[j] == '(') ++depth;
        if (raw[j] == ')' && --depth == 0) break;
      }
      const std::string what = raw.substr(i, j + 1 - i);
      const bool arithmetic = what.size() >= 6 && what.compare(0, 3, "$((") == 0 &&
                              what.compare(what.size() - 2, 2, "))") == 0;
      if (arithmetic) {
        if (const auto value = arithmetic_value(what.substr(3, what.size() - 5))) {
          append(std::to_string(*value), split);
          return j + 1;
        }
      }
      append(what, false, what);
      return j + 1;
    }
    std::string name, op, word;
    std::size_t next = i + 1;
    if (raw[i + 1] == '{') {
      const std::size_t e = raw.find('}', i + 2);
      const std::string body = raw.substr(i + 2, (e == std::string::npos ? raw.size() : e) - i - 2);
      next = e == std::string::npos ? raw.size() : e + 1;
      std::size_t k = 0;
      while (k < body.size() && (is_name_char(body[k]) || body[k] == '#' || body[k] == '@')) ++k;
      name = body.substr(0, k);
      if (body.compare(k, 3, "[@]") == 0 || body.compare(k, 3, "[*]") == 0) {
        op = "[@]";
      } else if (body.compare(k, 2, ":-") == 0 || body.compare(k, 2, ":=") == 0) {
        op = ":-";
        word = body.substr(k + 2);
      } else if (k < body.size() && (body[k] == '-' || body[k] == '=')) {
        op = ":-";
        word = body.substr(k + 1);
      }
    } else {
      while (next < raw.size() && is_name_char(raw[next]) &&
             !(next > i + 1 && std::isdigit(static_cast<unsigned char>(raw[i + 1])) != 0)) {
        ++next;
      }
      name = raw.substr(i + 1, next - i - 1);
      if (name.empty()) {  // $@, $#, $$, ...: nothing the file sets
        const std::string what = raw.substr(i, 2);
        append(what, false, what);
        return i + 2;
      }
    }
    const auto it = vars_.find(name);
    if (it == vars_.end() || (it->second.empty() && op != "[@]")) {
      if (op == ":-") {
        Expander inner(vars_, path_, used_);
        const auto words = inner.expand(word, line_, false);
        for (const auto& w : words) append(w.text, split, w.unresolved);
        return next;
      }
      const std::string what = raw.substr(i, next - i);
      append(what, false, "$" + name);
      return next;
    }
    if (op == "[@]") {
      for (std::size_t k = 0; k < it->second.size(); ++k) {
        if (k > 0) finish();
        line_ = it->second[k].line;
        append(it->second[k].text, split, it->second[k].unresolved);
        if (!split) exists_ = true;
      }
      return next;
    }
    const Element& e = it->second.front();
    append(e.text, split, e.unresolved.empty() ? "" : "$" + name + " (from " + e.unresolved + ")");
    return next;
  }

  const Variables& vars_;
  std::string path_;
  std::vector<ShellWord> words_;
  ShellWord cur_;
  bool exists_ = false;
  int line_ = 0;
  std::size_t& used_;
};

// `NAME=` or `NAME+=` at the start of a raw word: the name, whether it appends, and the value.
struct Assignment {
  std::string name;
  bool append = false;
  std::string value;
};
std::optional<Assignment> assignment(const std::string& raw) {
  std::size_t k = 0;
  while (k < raw.size() && is_name_char(raw[k])) ++k;
  if (k == 0 || std::isdigit(static_cast<unsigned char>(raw[0])) != 0 || k >= raw.size()) return std::nullopt;
  if (raw[k] == '=') return Assignment{raw.substr(0, k), false, raw.substr(k + 1)};
  if (raw.compare(k, 2, "+=") == 0) return Assignment{raw.substr(0, k), true, raw.substr(k + 2)};
  return std::nullopt;
}

// `[[ A -gt B ]]` and its siblings on decimal integers; nothing when a side is not one.
std::optional<bool> numeric_test(const std::string& a, const std::string& op, const std::string& b) {
  const auto x = shell_integer(a);
  const auto y = shell_integer(b);
  if (!x || !y) return std::nullopt;
  if (op == "-eq") return *x == *y;
  if (op == "-ne") return *x != *y;
  if (op == "-gt") return *x > *y;
  if (op == "-ge") return *x >= *y;
  if (op == "-lt") return *x < *y;
  if (op == "-le") return *x <= *y;
  return std::nullopt;
}

// The value of a condition made of string and integer tests (`[[ "$A" == b ]] || [ -z "$B" ]`,
// `[[ $N -gt 1 ]]`); nothing when it tests anything else (files, commands).
std::optional<bool> condition(const std::vector<ShellWord>& words) {
  std::optional<bool> result;
  std::string join = "";
  std::vector<std::string> test;
  auto close = [&]() -> bool {
    bool negate = false;
    std::size_t k = 0;
    if (k < test.size() && test[k] == "!") {
      negate = true;
      ++k;
    }
    std::optional<bool> v;
    const std::size_t n = test.size() - k;
    if (n == 2 && test[k] == "-z") v = test[k + 1].empty();
    if (n == 2 && test[k] == "-n") v = !test[k + 1].empty();
    if (n == 3 && (test[k + 1] == "==" || test[k + 1] == "=")) v = test[k] == test[k + 2];
    if (n == 3 && test[k + 1] == "!=") v = test[k] != test[k + 2];
    if (n == 3 && test[k + 1].size() == 3 && test[k + 1][0] == '-') v = numeric_test(test[k], test[k + 1], test[k + 2]);
    test.clear();
    if (!v) return false;
    const bool value = negate ? !*v : *v;
    result = !result ? value : (join == "&&" ? (*result && value) : (*result || value));
    return true;
  };
  for (const auto& w : words) {
    const std::string t = w.unresolved.empty() ? w.text : "";  // unset: empty in the test
    if (w.text == "[[" || w.text == "[") continue;
    if (w.text == "]]" || w.text == "]") {
      if (!close()) return std::nullopt;
    } else if (w.text == "||" || w.text == "&&") {
      if (!test.empty() && !close()) return std::nullopt;
      join = w.text;
    } else {
      test.push_back(t);
    }
  }
  if (!test.empty() && !close()) return std::nullopt;
  return result;
}

// If/elif/else nesting: whether the current branch is read.
struct Branch {
  bool reading = true;
  bool taken = false;
  bool parent = true;
};

}  // namespace

bool is_megatron_marker(std::string_view word) {
  for (const std::string_view flag : {"--tensor-model-parallel-size", "--pipeline-model-parallel-size",
                                      "--num-layers", "--hidden-size", "--micro-batch-size",
                                      "--global-batch-size", "--seq-length", "--num-attention-heads"}) {
    if (word == flag || (word.size() > flag.size() && word.substr(0, flag.size()) == flag &&
                         word[flag.size()] == '=')) {
      return true;
    }
  }
  return false;
}

std::vector<ShellWord> launch_command(std::string_view text, const std::string& path) {
  const std::vector<Token> tokens = tokenize(text);
  Variables vars;
  std::vector<Branch> branches;
  std::vector<ShellWord> launch;
  std::size_t used = 0;
  auto reading = [&] { return branches.empty() || (branches.back().reading && branches.back().parent); };
  std::size_t i = 0;
  while (i < tokens.size()) {
    // One statement: the tokens up to the next end, arrays spanning lines.
    std::vector<const Token*> stmt;
    while (i < tokens.size() && tokens[i].kind != Token::end) stmt.push_back(&tokens[i++]);
    ++i;
    std::size_t k = 0;
    while (k < stmt.size() && stmt[k]->kind == Token::word &&
           (stmt[k]->raw == "then" || stmt[k]->raw == "do" || stmt[k]->raw == "export" ||
            stmt[k]->raw == "local" || stmt[k]->raw == "declare" || stmt[k]->raw == "readonly")) {
      ++k;
    }
    if (k >= stmt.size() || stmt[k]->kind != Token::word) continue;
    const std::string& head = stmt[k]->raw;
    if (head == "if" || head == "elif") {
      std::vector<ShellWord> cond;
      Expander ex(vars, path, used);
      for (std::size_t j = k + 1; j < stmt.size() && stmt[j]->raw != "then"; ++j) {
        for (auto& w : ex.expand(stmt[j]->raw, stmt[j]->line)) cond.push_back(std::move(w));
      }
      const std::optional<bool> v = condition(cond);
      if (head == "if") {
        const bool parent = reading();
        branches.push_back({v.value_or(true), v.value_or(true), parent});
      } else if (!branches.empty()) {
        Branch& b = branches.back();
        b.reading = !b.taken && v.value_or(false);
        b.taken = b.taken || b.reading;
      }
      continue;
    }
    if (head == "else" && !branches.empty()) {
      branches.back().reading = !branches.back().taken;
      continue;
    }
    if (head == "fi") {
      if (!branches.empty()) branches.pop_back();
      continue;
    }
    if (!reading()) {
      // Skip an array body that spans lines in a branch not read.
      if (stmt.back()->kind == Token::open) {
        while (i < tokens.size() && tokens[i].kind != Token::close) ++i;
      }
      continue;
    }
    // Leading assignments, then maybe a command.
    bool assigned = false;
    while (k < stmt.size() && stmt[k]->kind == Token::word) {
      const auto a = assignment(stmt[k]->raw);
      if (!a) break;
      assigned = true;
      std::vector<Element> value;
      Expander ex(vars, path, used);
      if (a->value.empty() && k + 1 < stmt.size() && stmt[k + 1]->kind == Token::open) {
        // NAME=( ... ) may span lines: read tokens until the ')'.
        std::vector<const Token*> body(stmt.begin() + static_cast<std::ptrdiff_t>(k) + 2, stmt.end());
        bool closed = false;
        for (auto it = body.begin(); it != body.end(); ++it) {
          if ((*it)->kind == Token::close) {
            closed = true;
            body.erase(it, body.end());
            break;
          }
        }
        while (!closed && i < tokens.size()) {
          if (tokens[i].kind == Token::close) {
            closed = true;
          } else if (tokens[i].kind == Token::word) {
            body.push_back(&tokens[i]);
          }
          ++i;
        }
        for (const Token* t : body) {
          for (auto& w : ex.expand(t->raw, t->line, false)) value.push_back({w.text, w.line, w.unresolved});
        }
        k = stmt.size();
      } else {
        for (auto& w : ex.expand(a->value, stmt[k]->line, false)) value.push_back({w.text, w.line, w.unresolved});
        if (value.empty()) value.push_back({"", stmt[k]->line, ""});
        ++k;
      }
      auto& target = vars[a->name];
      if (!a->append) target.clear();
      for (auto& e : value) target.push_back(std::move(e));
    }
    if (k >= stmt.size() || (assigned && stmt[k]->kind != Token::word)) continue;
    std::vector<ShellWord> words;
    Expander ex(vars, path, used);
    for (; k < stmt.size(); ++k) {
      if (stmt[k]->kind != Token::word) continue;
      for (auto& w : ex.expand(stmt[k]->raw, stmt[k]->line)) words.push_back(std::move(w));
    }
    for (const auto& w : words) {
      if (is_megatron_marker(w.text)) {
        launch = std::move(words);
        break;
      }
    }
  }
  return launch;
}

}  // namespace tetra::interop::detail
