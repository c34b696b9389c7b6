#pragma once
/// Built-in model shapes and Hugging Face config import.

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "tetra/model/model.hpp"

namespace tetra::model {

/// llama1-13b/30b/65b, llama2-7b/13b/70b, llama3.1-8b/70b/405b, gpt3-175b; mixture of
/// experts: llama4-scout, llama4-maverick, mixtral-8x7b, mixtral-8x22b, qwen3-30b-a3b,
/// qwen3-235b-a22b, deepseek-v3 (MLA).
[[nodiscard]] std::span<const Model> model_presets();
[[nodiscard]] std::optional<Model> find_model_preset(std::string_view name);

/// Reads a Hugging Face `config.json` (LlamaForCausalLM-style keys: num_hidden_layers,
/// hidden_size, intermediate_size, num_attention_heads, num_key_value_heads, vocab_size,
/// tie_word_embeddings; GPT-2-style n_layer/n_embd/n_head/n_inner also accepted; head_dim;
/// the MoE and MLA keys of DeepSeek-V3, Qwen3-MoE, Mixtral, gpt-oss and Llama 4, whose
/// language model may sit under "text_config" — the table in hf_config.cpp).
/// Throws tetra::UserError naming the file, line and column of a syntax error or the key
/// that is missing or wrong.
[[nodiscard]] Model model_from_hf_config(const std::string& path);
/// Same, from text already read (`origin` names it in errors).
[[nodiscard]] Model model_from_hf_config_text(std::string_view json_text, const std::string& origin);

}  // namespace tetra::model
