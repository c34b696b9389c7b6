// Hugging Face `config.json` import. Keys (transformers' LlamaConfig / GPT2Config):
//   num_hidden_layers | n_layer         -> layers
//   hidden_size       | n_embd          -> hidden
//   intermediate_size | n_inner         -> ffn_hidden (GPT-2: n_inner null or absent = 4 n_embd)
//   num_attention_heads | n_head        -> heads
//   num_key_value_heads                 -> kv_heads (absent or null = heads, no GQA)
//   vocab_size                          -> vocab
//   tie_word_embeddings                 -> tied_embeddings (default: true for GPT-2-style
//                                          files, false otherwise)
// Architecture rule: arch = gpt when "model_type" starts with "gpt" (gpt2, gpt_neox, gptj,
// gpt_bigcode) or, without "model_type", when the GPT-2 key n_layer is used; llama otherwise.
#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tetra/hw/error.hpp"
#include "tetra/llama/presets.hpp"

namespace tetra::llama {

namespace {

using nlohmann::json;

/// 1-based line and column of byte offset `offset` (0-based) in `text`.
SourceLocation locate(std::string_view text, const std::string& origin, std::size_t offset) {
  offset = std::min(offset, text.size());
  SourceLocation loc{origin, 1, 1};
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++loc.line;
      line_start = i + 1;
    }
  }
  loc.column = static_cast<int>(offset - line_start) + 1;
  return loc;
}

/// Position of the first `"key"` followed by a colon, for errors about a key's value.
SourceLocation locate_key(std::string_view text, const std::string& origin, const std::string& key) {
  const std::string quoted = "\"" + key + "\"";
  std::size_t pos = 0;
  while ((pos = text.find(quoted, pos)) != std::string_view::npos) {
    std::size_t after = pos + quoted.size();
    while (after < text.size() && (text[after] == ' ' || text[after] == '\t' ||
                                   text[after] == '\n' || text[after] == '\r')) {
      ++after;
    }
    if (after < text.size() && text[after] == ':') return locate(text, origin, pos);
    pos = after;
  }
  return SourceLocation{origin, 0, 0};
}

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::string:
      return "a string";
    case json::value_t::number_float:
      return "a fractional number";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    default:
      return "an unsupported value";
  }
}

class Reader {
 public:
  Reader(const json& root, std::string_view text, const std::string& origin)
      : root_(root), text_(text), origin_(origin) {}

  [[nodiscard]] bool has(const std::string& key) const {
    return root_.contains(key) && !root_.at(key).is_null();
  }

  /// Positive integer at the first of `keys` present; error names `keys[0]` when none is.
  [[nodiscard]] int positive_int(std::initializer_list<const char*> keys, const char* what) const {
    for (const char* key : keys) {
      if (has(key)) return positive_int_at(key, what);
    }
    std::string names;
    for (const char* key : keys) {
      if (!names.empty()) names += " or ";
      names += key;
    }
    throw UserError(SourceLocation{origin_, 0, 0}, *keys.begin(),
                    "missing key (" + names + "); expected a positive integer, " + what);
  }

  [[nodiscard]] int positive_int_at(const std::string& key, const char* what) const {
    const json& v = root_.at(key);
    bool ok = false;
    long long n = 0;
    if (v.is_number_unsigned()) {
      const auto u = v.get<unsigned long long>();
      ok = u <= static_cast<unsigned long long>(std::numeric_limits<int>::max());
      n = static_cast<long long>(u);
    } else if (v.is_number_integer()) {
      n = v.get<long long>();
      ok = n > 0 && n <= std::numeric_limits<int>::max();
    }
    if (!ok || n <= 0) {
      std::string got = v.is_number() ? v.dump() : type_name(v);
      throw UserError(locate_key(text_, origin_, key), key,
                      std::string("expected a positive integer, ") + what + ", got " + got);
    }
    return static_cast<int>(n);
  }

  [[nodiscard]] bool boolean(const std::string& key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = root_.at(key);
    if (!v.is_boolean()) {
      throw UserError(locate_key(text_, origin_, key), key,
                      std::string("expected true or false, got ") + type_name(v));
    }
    return v.get<bool>();
  }

  [[nodiscard]] std::string string(const std::string& key) const {
    if (!has(key)) return {};
    const json& v = root_.at(key);
    if (!v.is_string()) {
      throw UserError(locate_key(text_, origin_, key), key,
                      std::string("expected a string, got ") + type_name(v));
    }
    return v.get<std::string>();
  }

 private:
  const json& root_;
  std::string_view text_;
  const std::string& origin_;
};

}  // namespace

Model model_from_hf_config_text(std::string_view json_text, const std::string& origin) {
  json root;
  try {
    root = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& e) {
    // e.byte counts the characters read, the last being the offending one.
    const std::size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    std::string detail = e.what();
    // Keep nlohmann's explanation, drop its "[json.exception...] parse error at ...:" prefix.
    if (const auto colon = detail.find(": "); colon != std::string::npos) {
      detail = detail.substr(colon + 2);
    }
    throw UserError(locate(json_text, origin, offset), "", "invalid JSON: " + detail);
  } catch (const json::exception& e) {
    // A number beyond a double ("1e999") is out_of_range 406: "number overflow parsing 'TEXT'".
    std::string detail = e.what();
    std::size_t offset = 0;
    const auto open = detail.find('\'');
    const auto close = open == std::string::npos ? open : detail.find('\'', open + 1);
    if (close != std::string::npos) {
      const auto at = json_text.find(detail.substr(open + 1, close - open - 1));
      if (at != std::string_view::npos) offset = at;
    }
    if (const auto colon = detail.find("] "); colon != std::string::npos) detail = detail.substr(colon + 2);
    throw UserError(locate(json_text, origin, offset), "", "invalid JSON: " + detail);
  }
  if (!root.is_object()) {
    throw UserError(SourceLocation{origin, 1, 1}, "",
                    std::string("expected a JSON object (a Hugging Face config.json), got ") +
                        type_name(root));
  }
  const Reader r(root, json_text, origin);
  const std::string model_type = r.string("model_type");
  const bool gpt2_keys = r.has("n_layer");
  const bool is_gpt = model_type.rfind("gpt", 0) == 0 || (model_type.empty() && gpt2_keys);

  Model m;
  m.name = "custom";
  m.arch = is_gpt ? Arch::gpt : Arch::llama;
  m.layers = r.positive_int({"num_hidden_layers", "n_layer"}, "the number of transformer layers");
  m.hidden = r.positive_int({"hidden_size", "n_embd"}, "the hidden size");
  m.heads = r.positive_int({"num_attention_heads", "n_head"}, "the number of attention heads");
  if (r.has("intermediate_size")) {
    m.ffn_hidden = r.positive_int_at("intermediate_size", "the FFN hidden size");
  } else if (r.has("n_inner")) {
    m.ffn_hidden = r.positive_int_at("n_inner", "the FFN hidden size");
  } else if (gpt2_keys || is_gpt) {
    m.ffn_hidden = 4 * m.hidden;  // GPT-2: n_inner = None means 4 * n_embd
  } else {
    throw UserError(SourceLocation{origin, 0, 0}, "intermediate_size",
                    "missing key; expected a positive integer, the FFN hidden size");
  }
  m.kv_heads = r.has("num_key_value_heads")
                   ? r.positive_int_at("num_key_value_heads", "the number of KV heads")
                   : m.heads;
  m.vocab = r.positive_int({"vocab_size"}, "the vocabulary size");
  m.tied_embeddings = r.boolean("tie_word_embeddings", gpt2_keys || model_type == "gpt2");
  if (m.hidden % m.heads != 0) {
    throw UserError(locate_key(json_text, origin, r.has("hidden_size") ? "hidden_size" : "n_embd"),
                    r.has("hidden_size") ? "hidden_size" : "n_embd",
                    "hidden size " + std::to_string(m.hidden) + " must be a multiple of heads=" +
                        std::to_string(m.heads));
  }
  if (m.heads % m.kv_heads != 0) {
    throw UserError(locate_key(json_text, origin, "num_key_value_heads"), "num_key_value_heads",
                    "heads=" + std::to_string(m.heads) + " must be a multiple of kv_heads=" +
                        std::to_string(m.kv_heads));
  }
  return m;
}

Model model_from_hf_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(SourceLocation{path, 0, 0}, "", "cannot open the file for reading");
  std::ostringstream buf;
  buf << in.rdbuf();
  if (in.bad()) throw UserError(SourceLocation{path, 0, 0}, "", "cannot read the file");
  return model_from_hf_config_text(buf.str(), path);
}

}  // namespace tetra::llama
