// libyaml's event stream -> YamlNode tree. The event API never expands aliases, so an alias is
// refused where it appears rather than copied: no input grows beyond its own size.

#include "yaml_tree.hpp"

#include <yaml.h>

#include <algorithm>
#include <set>
#include <string>

#include "readers.hpp"
#include "tetra/base/error.hpp"

namespace tetra::interop::detail {

std::string printable(std::string_view s) {
  const std::string head = ascii_escaped(s.substr(0, 80));
  return s.size() > 80 ? head + "..." : head;
}

namespace {

// libyaml's parser and event, released on every path out.
struct Parser {
  yaml_parser_t p{};
  bool ok = false;
  Parser() { ok = yaml_parser_initialize(&p) != 0; }
  ~Parser() { yaml_parser_delete(&p); }
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;
};
struct Event {
  yaml_event_t e{};
  ~Event() { yaml_event_delete(&e); }
};

// A sequence or mapping being read, with the key its next value belongs to.
struct Frame {
  YamlNode node;
  std::string key;
  bool has_key = false;
  std::set<std::string, std::less<>> keys;
};

class TreeBuilder {
 public:
  explicit TreeBuilder(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(const yaml_mark_t& at, const std::string& message) const {
    throw UserError(SourceLocation{path_, static_cast<int>(at.line) + 1, static_cast<int>(at.column) + 1}, key_path(),
                    message);
  }

  // One event; false at the end of the stream.
  bool take(const yaml_event_t& e) {
    switch (e.type) {
      case YAML_DOCUMENT_START_EVENT:
        if (++documents_ > 1) fail(e.start_mark, "a second YAML document (the file must hold one)");
        return true;
      case YAML_ALIAS_EVENT:
        fail(e.start_mark, "YAML alias *" + printable(reinterpret_cast<const char*>(e.data.alias.anchor)) +
                               " is not read (write the value where it is used)");
      case YAML_SCALAR_EVENT: {
        YamlNode n = start(e);
        n.value.assign(reinterpret_cast<const char*>(e.data.scalar.value), e.data.scalar.length);
        n.plain = e.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        attach(std::move(n), e.start_mark);
        return true;
      }
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT: {
        if (!stack_.empty() && stack_.back().node.kind == YamlNode::Kind::mapping && !stack_.back().has_key) {
          fail(e.start_mark, "a mapping key must be a plain value, not a sequence or mapping");
        }
        if (static_cast<int>(stack_.size()) >= kMaxYamlDepth) {
          fail(e.start_mark, "nested deeper than " + std::to_string(kMaxYamlDepth) + " levels");
        }
        Frame f;
        f.node = start(e);
        f.node.kind = e.type == YAML_MAPPING_START_EVENT ? YamlNode::Kind::mapping : YamlNode::Kind::sequence;
        stack_.push_back(std::move(f));
        return true;
      }
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT: {
        YamlNode n = std::move(stack_.back().node);
        stack_.pop_back();
        attach(std::move(n), e.start_mark);
        return true;
      }
      case YAML_STREAM_END_EVENT: return false;
      default: return true;  // stream start, document end
    }
  }

  YamlNode root() {
    if (!has_root_) {
      YamlNode empty;
      empty.line = 1;
      empty.column = 1;
      return empty;  // an empty file: a null document
    }
    return std::move(root_);
  }

 private:
  YamlNode start(const yaml_event_t& e) {
    if (++nodes_ > kMaxYamlNodes) fail(e.start_mark, "more than " + std::to_string(kMaxYamlNodes) + " YAML values");
    YamlNode n;
    n.line = static_cast<int>(e.start_mark.line) + 1;
    n.column = static_cast<int>(e.start_mark.column) + 1;
    return n;
  }

  void attach(YamlNode n, const yaml_mark_t& at) {
    if (stack_.empty()) {
      root_ = std::move(n);
      has_root_ = true;
      return;
    }
    Frame& f = stack_.back();
    if (f.node.kind == YamlNode::Kind::sequence) {
      f.node.items.push_back(std::move(n));
    } else if (!f.has_key) {
      if (!f.keys.insert(n.value).second) fail(at, "key '" + printable(n.value) + "' is repeated in this mapping");
      f.key = std::move(n.value);
      f.has_key = true;
    } else {
      f.node.entries.push_back(YamlEntry{std::move(f.key), std::move(n)});
      f.has_key = false;
    }
  }

  // "model.optim.betas[1]": where in the document the parser is.
  std::string key_path() const {
    std::string out;
    for (const Frame& f : stack_) {
      if (f.node.kind == YamlNode::Kind::sequence) {
        out += "[" + std::to_string(f.node.items.size()) + "]";
      } else if (f.has_key) {
        out += (out.empty() ? "" : ".") + printable(f.key);
      }
    }
    return out;
  }

  std::string path_;
  std::vector<Frame> stack_;
  YamlNode root_;
  bool has_root_ = false;
  int documents_ = 0;
  std::size_t nodes_ = 0;
};

// The line and column of byte `offset` of `text`.
yaml_mark_t mark_at(std::string_view text, std::size_t offset) {
  yaml_mark_t m{};
  offset = std::min(offset, text.size());
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++m.line;
      m.column = 0;
    } else {
      ++m.column;
    }
  }
  m.index = offset;
  return m;
}

}  // namespace

bool YamlNode::is_null() const noexcept {
  return kind == Kind::scalar && plain && (value.empty() || value == "~" || value == "null" || value == "Null" ||
                                           value == "NULL");
}

int YamlNode::boolean() const noexcept {
  if (kind != Kind::scalar) return -1;
  if (value == "true" || value == "True" || value == "TRUE") return 1;
  if (value == "false" || value == "False" || value == "FALSE") return 0;
  return -1;
}

YamlNode parse_yaml(std::string_view text, const std::string& path) {
  if (text.size() > kMaxYamlBytes) {
    throw UserError(SourceLocation{path, 1}, "", "the YAML file is larger than " +
                                                     std::to_string(kMaxYamlBytes >> 20) + " MiB");
  }
  Parser parser;
  if (!parser.ok) throw UserError(SourceLocation{path}, "", "libyaml could not start");
  yaml_parser_set_input_string(&parser.p, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  TreeBuilder tree(path);
  for (;;) {
    Event event;
    if (yaml_parser_parse(&parser.p, &event.e) == 0) {
      std::string message = std::string("YAML: ") + (parser.p.problem != nullptr ? parser.p.problem : "syntax error");
      if (parser.p.context != nullptr) message += std::string(" ") + parser.p.context;
      yaml_mark_t at = parser.p.problem_mark;
      // A reader error (bytes that are not UTF-8) has an offset, not a mark.
      if (parser.p.error == YAML_READER_ERROR) at = mark_at(text, parser.p.problem_offset);
      tree.fail(at, message);
    }
    if (!tree.take(event.e)) break;
  }
  return tree.root();
}

}  // namespace tetra::interop::detail
