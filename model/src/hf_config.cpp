// Hugging Face `config.json` import. Keys (transformers' LlamaConfig / GPT2Config):
//   num_hidden_layers | n_layer         -> layers
//   hidden_size       | n_embd          -> hidden
//   intermediate_size | n_inner         -> ffn_hidden (GPT-2: n_inner null or absent = 4 n_embd)
//   num_attention_heads | n_head        -> heads
//   num_key_value_heads                 -> kv_heads (absent or null = heads, no GQA)
//   vocab_size                          -> vocab
//   tie_word_embeddings                 -> tied_embeddings (default: true for GPT-2-style
//                                          files, false otherwise)
//   head_dim                            -> head_dim_override (when not hidden / heads)
//   model_type qwen3 | qwen3_moe        -> qk_norm (transformers' Qwen3Attention and
//                                          Qwen3MoeAttention always build q_norm and k_norm)
// MoE (model/moe.hpp), by model family:
//   n_routed_experts | num_local_experts | num_experts   -> moe.num_experts (absent or 0: dense)
//   num_experts_per_tok                                  -> moe.experts_per_token
//   moe_intermediate_size                                -> moe.moe_ffn_hidden (DeepSeek-V3,
//     Qwen3-MoE); without it (Mixtral, gpt-oss, Llama 4) intermediate_size is the expert width
//   n_shared_experts (DeepSeek), shared_expert_intermediate_size (Qwen2-MoE) -> shared experts;
//     Llama 4 has one shared expert of intermediate_size in every MoE layer
//   intermediate_size_mlp (Llama 4)                      -> ffn_hidden of the dense layers
//   first_k_dense_replace, moe_layer_freq (DeepSeek)     -> moe.first_k_dense, moe.moe_layer_freq
//   interleave_moe_layer_step (Llama 4), decoder_sparse_step (Qwen3-MoE) -> moe.interleave_step
//   mlp_only_layers (Qwen3-MoE) must be empty (a dense-layer list is not expressible)
//   scoring_func "sigmoid" (DeepSeek-V3), model_type mixtral / llama4 -> moe.router
//   q_lora_rank (null = 0), kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim -> mla
//   num_nextn_predict_layers (DeepSeek-V3)               -> mtp_layers
// Llama 4's multimodal config.json nests the language model under "text_config"; that object is
// read when present.
// Architecture rule: arch = gpt-oss for "model_type" gpt_oss (openai/gpt-oss-20b and -120b);
// gpt when "model_type" starts with "gpt" (gpt2, gpt_neox, gptj, gpt_bigcode) or, without
// "model_type", when the GPT-2 key n_layer is used; llama otherwise.
#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tetra/base/text_file.hpp"
#include "tetra/base/error.hpp"
#include "tetra/model/presets.hpp"

namespace tetra::model {

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

  /// Non-negative integer, `fallback` when absent or null.
  [[nodiscard]] int count(const std::string& key, int fallback) const {
    if (!has(key)) return fallback;
    const json& v = root_.at(key);
    if (v.is_number_integer() && v.get<long long>() == 0) return 0;
    return positive_int_at(key, "or 0");
  }

  [[nodiscard]] const json& at(const std::string& key) const { return root_.at(key); }

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

/// The MoE, MLA, head_dim and MTP keys (table at the top of the file).
void read_moe_keys(const Reader& r, Model& m, const std::string& model_type,
                   std::string_view text, const std::string& origin) {
  if (r.has("head_dim")) {
    const int d = r.positive_int_at("head_dim", "the attention head width");
    if (d * static_cast<long long>(m.heads) != m.hidden) m.head_dim_override = d;
  }
  m.mtp_layers = r.count("num_nextn_predict_layers", 0);
  const bool llama4 = model_type.rfind("llama4", 0) == 0;
  const char* experts_key = r.has("n_routed_experts")    ? "n_routed_experts"
                            : r.has("num_local_experts") ? "num_local_experts"
                                                         : "num_experts";
  const int experts = r.count(experts_key, 0);
  if (experts > 0) {
    Moe e;
    e.num_experts = experts;
    e.experts_per_token = r.positive_int({"num_experts_per_tok"}, "experts per token (top-k)");
    if (r.has("moe_intermediate_size")) {
      e.moe_ffn_hidden = r.positive_int_at("moe_intermediate_size", "the expert FFN width");
    } else {
      e.moe_ffn_hidden = m.ffn_hidden;  // Mixtral, gpt-oss, Llama 4: intermediate_size per expert
    }
    if (llama4) {
      // Llama4TextMoe: a shared expert of intermediate_size beside the routed ones; the dense
      // layers use intermediate_size_mlp.
      e.shared_experts = 1;
      if (r.has("intermediate_size_mlp")) {
        m.ffn_hidden = r.positive_int_at("intermediate_size_mlp", "the dense FFN width");
      }
      e.router = Router::sigmoid_topk;
    } else if (model_type == "mixtral") {
      e.router = Router::topk_softmax;
    } else if (r.string("scoring_func") == "sigmoid") {
      e.router = Router::sigmoid_topk;
    }
    e.shared_experts = std::max(e.shared_experts, r.count("n_shared_experts", 0));
    if (const int w = r.count("shared_expert_intermediate_size", 0); w > 0) {
      e.shared_experts = std::max(e.shared_experts, 1);
      e.shared_ffn_hidden = w;
    }
    e.first_k_dense = r.count("first_k_dense_replace", 0);
    e.moe_layer_freq = std::max(r.count("moe_layer_freq", 1), 1);
    e.interleave_step = std::max(r.count("interleave_moe_layer_step", r.count("decoder_sparse_step", 1)), 1);
    if (r.has("mlp_only_layers") && !(r.at("mlp_only_layers").is_array() && r.at("mlp_only_layers").empty())) {
      throw UserError(locate_key(text, origin, "mlp_only_layers"), "mlp_only_layers",
                      "a list of dense layers is not supported (expected [])");
    }
    if (e.experts_per_token > e.num_experts) {
      throw UserError(locate_key(text, origin, "num_experts_per_tok"), "num_experts_per_tok",
                      "num_experts_per_tok=" + std::to_string(e.experts_per_token) +
                          " must not exceed " + experts_key + "=" + std::to_string(e.num_experts));
    }
    m.moe = e;
  }
  if (r.has("kv_lora_rank")) {
    Mla a;
    a.q_lora_rank = r.count("q_lora_rank", 0);
    a.kv_lora_rank = r.positive_int_at("kv_lora_rank", "the KV latent rank");
    a.qk_nope_head_dim = r.positive_int({"qk_nope_head_dim"}, "the non-RoPE query/key head width");
    a.qk_rope_head_dim = r.positive_int({"qk_rope_head_dim"}, "the RoPE query/key head width");
    a.v_head_dim = r.positive_int({"v_head_dim"}, "the value head width");
    m.mla = a;
  }
}

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
  // Llama 4 (Llama4ForConditionalGeneration): the language model is "text_config".
  const json& lm = root.contains("text_config") && root.at("text_config").is_object()
                       ? root.at("text_config")
                       : root;
  const Reader r(lm, json_text, origin);
  const std::string model_type = r.string("model_type");
  const bool gpt2_keys = r.has("n_layer");
  const bool is_gpt_oss = model_type == "gpt_oss";
  const bool is_gpt = !is_gpt_oss && (model_type.rfind("gpt", 0) == 0 || (model_type.empty() && gpt2_keys));

  Model m;
  m.name = "custom";
  m.arch = is_gpt_oss ? Arch::gpt_oss : is_gpt ? Arch::gpt : Arch::llama;
  m.layers = r.positive_int({"num_hidden_layers", "n_layer"}, "the number of transformer layers");
  m.hidden = r.positive_int({"hidden_size", "n_embd"}, "the hidden size");
  m.heads = r.positive_int({"num_attention_heads", "n_head"}, "the number of attention heads");
  if (r.has("intermediate_size")) {
    m.ffn_hidden = r.positive_int_at("intermediate_size", "the FFN hidden size");
  } else if (r.has("n_inner")) {
    m.ffn_hidden = r.positive_int_at("n_inner", "the FFN hidden size");
  } else if (gpt2_keys || is_gpt) {
    // GPT-2: n_inner = None means 4 * n_embd.
    if (m.hidden > std::numeric_limits<int>::max() / 4) {
      const char* key = r.has("hidden_size") ? "hidden_size" : "n_embd";
      throw UserError(SourceLocation{origin, 0, 0}, key,
                      "too large: without n_inner the FFN hidden size is 4 x " + std::string(key) + ", more than " +
                          std::to_string(std::numeric_limits<int>::max()));
    }
    m.ffn_hidden = 4 * m.hidden;
  } else {
    throw UserError(SourceLocation{origin, 0, 0}, "intermediate_size",
                    "missing key; expected a positive integer, the FFN hidden size");
  }
  m.kv_heads = r.has("num_key_value_heads")
                   ? r.positive_int_at("num_key_value_heads", "the number of KV heads")
                   : m.heads;
  m.vocab = r.positive_int({"vocab_size"}, "the vocabulary size");
  m.tied_embeddings = r.boolean("tie_word_embeddings", gpt2_keys || model_type == "gpt2");
  read_moe_keys(r, m, model_type.empty() ? r.string("model_type") : model_type, json_text, origin);
  m.qk_norm = model_type == "qwen3" || model_type == "qwen3_moe";
  if (m.head_dim_override == 0 && !m.mla && m.hidden % m.heads != 0) {
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
  return model_from_hf_config_text(read_input_file(path), path);
}

}  // namespace tetra::model
