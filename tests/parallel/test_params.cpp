// Parameter counts. F24-code = the estimator of Fujii et al. 2024 (arXiv 2411.06465),
// `okoge-kaz/Megatron-LM: tools/memory_estimate/memory_consumption_estimator.py` (85347a6b);
// N21 = Narayanan et al. 2021, arXiv 2104.04473.
#include <doctest/doctest.h>

#include <numeric>
#include <string>

#include "tetra/parallel/params.hpp"
#include "tetra/model/presets.hpp"

using namespace tetra::model;
using namespace tetra::parallel;

namespace {
Model preset(const char* name) {
  auto m = find_model_preset(name);
  REQUIRE(m);
  return *m;
}
std::int64_t sum_params(const std::vector<StageParams>& stages) {
  std::int64_t s = 0;
  for (const auto& st : stages) s += st.params;
  return s;
}
}  // namespace

TEST_SUITE("llama") {
  TEST_CASE("Llama-3.1-8B: 218,112,000 per layer, 8,030,261,248 total (F24-code)") {
    const Model m = preset("llama3.1-8b");
    // 2*4096^2*(1 + 8/32) + 3*4096*14336 + 2*4096 = 41,943,040 + 176,160,768 + 8,192
    CHECK(params_per_layer(m) == 218'112'000);
    // 32*218,112,000 + 4096 + 2*4096*128256 = 6,979,588,096 + 1,050,673,152
    CHECK(total_params(m, 8192) == 8'030'261'248);
  }

  TEST_CASE("Llama-3.1-70B: 855,654,400 per layer, 70,553,706,496 total") {
    const Model m = preset("llama3.1-70b");
    CHECK(params_per_layer(m) == 855'654'400);
    CHECK(total_params(m, 8192) == 70'553'706'496);
  }

  TEST_CASE("Llama-3.1-405B: 405,853,388,800 (model card safetensors total)") {
    const Model m = preset("llama3.1-405b");
    // per layer 2*16384^2*(1 + 8/128) + 3*16384*53248 + 2*16384 = 3,187,703,808;
    // 126 layers 401,650,679,808 + final norm 16,384 + 2*16384*128256 = 4,202,692,608
    CHECK(params_per_layer(m) == 3'187'703'808);
    CHECK(total_params(m, 8192) == 405'853'388'800);
  }

  TEST_CASE("Llama 2 and LLaMA-1 totals (Hugging Face safetensors totals)") {
    CHECK(total_params(preset("llama2-7b"), 4096) == 6'738'415'616);
    CHECK(total_params(preset("llama2-13b"), 4096) == 13'015'864'320);
    CHECK(total_params(preset("llama2-70b"), 4096) == 68'976'648'192);
    CHECK(total_params(preset("llama1-13b"), 2048) == 13'015'864'320);
    // [derived] from the shapes: 60*535,049,216 + 6656 + 2*6656*32000
    CHECK(total_params(preset("llama1-30b"), 2048) == 32'528'943'616);
    // [derived]: 80*809,517,056 + 8192 + 2*8192*32000
    CHECK(total_params(preset("llama1-65b"), 2048) == 65'285'660'672);
  }

  TEST_CASE("GPT block: 12h^2 + 13h per layer, model with learned positions (N21 5.1)") {
    const Model m = preset("gpt3-175b");
    const std::int64_t h = 12288;
    CHECK(m.arch == Arch::gpt);
    CHECK(params_per_layer(m) == 12 * h * h + 13 * h);
    // 12*150,994,944 + 13*12288 = 1,811,939,328 + 159,744
    CHECK(params_per_layer(m) == 1'812'099'072);
    // 96 layers + tied embedding 50257*h + positions 2048*h + final LayerNorm 2h
    // = 173,961,510,912 + 617,558,016 + 25,165,824 + 24,576 = 174,604,259,328
    const std::int64_t expect = 96 * (12 * h * h + 13 * h) + 50257 * h + 2048 * h + 2 * h;
    CHECK(total_params(m, 2048) == expect);
    CHECK(total_params(m, 2048) == 174'604'259'328);
    // Untied adds the LM head; positions follow seq_len.
    Model untied = m;
    untied.tied_embeddings = false;
    CHECK(total_params(untied, 2048) - total_params(m, 2048) == 50257 * h);
    CHECK(total_params(m, 4096) - total_params(m, 2048) == 2048 * h);
  }

  TEST_CASE("padded vocabulary: multiple of 128*tp (Megatron _vocab_size_with_padding)") {
    const Model m = preset("llama3.1-8b");
    CHECK(padded_vocab(m, 1) == 128256);
    CHECK(padded_vocab(m, 2) == 128256);
    CHECK(padded_vocab(m, 8) == 129024);
    CHECK(padded_vocab(preset("gpt3-175b"), 1) == 50304);
  }

  TEST_CASE("stage layers: even, uneven first/last") {
    const Model m8 = preset("llama3.1-8b");
    Layout l;
    l.pp = 4;
    CHECK(stage_layers(m8, l) == std::vector<int>{8, 8, 8, 8});
    l.pp = 1;
    CHECK(stage_layers(m8, l) == std::vector<int>{32});
    l.pp = 4;
    l.vp = 2;  // interleaved: each rank still holds L/pp layers in vp chunks
    CHECK(stage_layers(m8, l) == std::vector<int>{8, 8, 8, 8});

    const Model m405 = preset("llama3.1-405b");
    Layout u;
    u.pp = 16;
    u.first_stage_layers = 6;
    u.last_stage_layers = 6;
    // (126 - 12) / 14 = 114 / 14 is not whole; Megatron would refuse. 7 and 7: 112/14 = 8.
    u.first_stage_layers = 7;
    u.last_stage_layers = 7;
    auto layers = stage_layers(m405, u);
    REQUIRE(layers.size() == 16);
    CHECK(layers.front() == 7);
    CHECK(layers.back() == 7);
    for (std::size_t r = 1; r + 1 < layers.size(); ++r) CHECK(layers[r] == 8);
    CHECK(std::accumulate(layers.begin(), layers.end(), 0) == 126);

    // Only the first stage fixed: 126 - 6 = 120 over 15 ranks = 8 each.
    Layout f;
    f.pp = 16;
    f.first_stage_layers = 6;
    layers = stage_layers(m405, f);
    CHECK(layers.front() == 6);
    CHECK(layers.back() == 8);
    CHECK(std::accumulate(layers.begin(), layers.end(), 0) == 126);

    // pp = 2 with both fixed.
    Layout two;
    two.pp = 2;
    two.first_stage_layers = 15;
    two.last_stage_layers = 17;
    CHECK(stage_layers(m8, two) == std::vector<int>{15, 17});
  }

  TEST_CASE("stage params: explicit per-stage form (F24-code)") {
    const Model m = preset("llama3.1-8b");
    SUBCASE("tp=1: stages sum to the total, embedding first, head last") {
      for (int pp : {1, 2, 4, 8}) {
        Layout l;
        l.pp = pp;
        const auto st = stage_params(m, l, 8192);
        CAPTURE(pp);
        REQUIRE(st.size() == static_cast<std::size_t>(pp));
        CHECK(sum_params(st) == total_params(m, 8192));
        CHECK(st.front().has_embedding);
        CHECK(st.back().has_head);
      }
      Layout l;
      l.pp = 4;
      const auto st = stage_params(m, l, 8192);
      // first: 8*218,112,000 + 4096*128256 = 1,744,896,000 + 525,336,576
      CHECK(st[0].params == 2'270'232'576);
      CHECK(st[1].params == 1'744'896'000);
      // last: layers + final norm 4096 + LM head
      CHECK(st[3].params == 2'270'236'672);
    }
    SUBCASE("TP shards linears and the padded vocabulary, replicates norms") {
      Layout l;
      l.tp = 8;
      l.pp = 4;
      const auto st = stage_params(m, l, 8192);
      // W_layer = (41,943,040 + 176,160,768)/8 + 8192 = 27,262,976 + 8192 = 27,271,168
      // E = 4096 * 129024 / 8 = 66,060,288
      CHECK(st[0].params == 8 * 27'271'168 + 66'060'288);
      CHECK(st[1].params == 8 * 27'271'168);
      CHECK(st[3].params == 8 * 27'271'168 + 4096 + 66'060'288);
      // F24-code form with tp = 2 (vocab needs no padding): sum * t ~ total (norms counted t times)
      Layout l2;
      l2.tp = 2;
      l2.pp = 2;
      const auto s2 = stage_params(m, l2, 8192);
      const std::int64_t norms = 32 * 2 * 4096 + 4096;
      CHECK(2 * sum_params(s2) - norms == total_params(m, 8192));
    }
    SUBCASE("tied embeddings: the last stage keeps a copy when pp > 1") {
      Model tied = m;
      tied.tied_embeddings = true;
      Layout l;
      l.pp = 1;
      CHECK(sum_params(stage_params(tied, l, 8192)) == total_params(tied, 8192));
      l.pp = 4;
      CHECK(sum_params(stage_params(tied, l, 8192)) ==
            total_params(tied, 8192) + 4096LL * 128256);
    }
    SUBCASE("uneven split") {
      const Model big = preset("llama3.1-405b");
      Layout u;
      u.pp = 16;
      u.first_stage_layers = 7;
      u.last_stage_layers = 7;
      const auto st = stage_params(big, u, 8192);
      CHECK(st[0].layers == 7);
      CHECK(st[5].layers == 8);
      CHECK(sum_params(st) == total_params(big, 8192));
      // Interleaved, vp 8 (arXiv 2407.21783 section 3.3.2): the same per-rank layers.
      u.vp = 8;
      const auto sv = stage_params(big, u, 8192);
      CHECK(sv[0].layers == 7);
      CHECK(sv[5].layers == 8);
      CHECK(sv[15].layers == 7);
      CHECK(sum_params(sv) == total_params(big, 8192));
    }
    SUBCASE("gpt: positions on the first stage, LayerNorm final norm") {
      const Model g = preset("gpt3-175b");
      Layout l;
      l.pp = 8;
      const auto st = stage_params(g, l, 2048);
      Model g128 = g;
      g128.vocab = 50304;  // padded vocabulary is what stage_params counts
      // tied, pp > 1: one extra embedding copy on the last stage
      CHECK(sum_params(st) == total_params(g128, 2048) + 12288LL * 50304);
      CHECK(st[0].params - st[1].params == 12288LL * 50304 + 2048LL * 12288);
    }
  }
}

TEST_CASE("uneven_split follows the Megatron first/last rule") {
  // Llama 3 405B: 126 layers on 16 stages -> middle ranks ceil(126/16) = 8 each,
  // the ends share 126 - 14*8 = 14 -> 7 and 7 (arXiv 2407.21783 section 3.3.2).
  const auto s405 = tetra::parallel::uneven_split(126, 16);
  REQUIRE(s405.has_value());
  CHECK(s405->first_stage_layers == 7);
  CHECK(s405->last_stage_layers == 7);
  // 60 layers on 8 stages: k = 8, rest 60 - 6*8 = 12 -> 6 and 6.
  const auto s60 = tetra::parallel::uneven_split(60, 8);
  REQUIRE(s60.has_value());
  CHECK(s60->first_stage_layers == 6);
  CHECK(s60->last_stage_layers == 6);
  // 60 on 16: k = 4, rest 60 - 14*4 = 4 -> 2 and 2.
  CHECK(tetra::parallel::uneven_split(60, 16)->first_stage_layers == 2);
  // Divisible counts and single stages need no split.
  CHECK_FALSE(tetra::parallel::uneven_split(80, 8).has_value());
  CHECK_FALSE(tetra::parallel::uneven_split(7, 1).has_value());
  // The split always sums back to the layer count through stage_layers.
  tetra::model::Model m;
  m.layers = 126;
  tetra::parallel::Layout l;
  l.pp = 16;
  l.first_stage_layers = s405->first_stage_layers;
  l.last_stage_layers = s405->last_stage_layers;
  int sum = 0;
  for (int n : tetra::parallel::stage_layers(m, l)) sum += n;
  CHECK(sum == 126);
}

TEST_CASE("uneven_chunk_split: every chunk k = ceil(L/(pp vp)), the end chunks share the rest") {
  using tetra::parallel::uneven_chunk_split;
  // Llama 3 405B, pp 16, vp 8 (arXiv 2407.21783 section 3.3.2): 128 chunks, k = ceil(126/128)
  // = 1, rest 126 - 126*1 = 0 -> first and last chunk 0 layers (embedding / head only);
  // the end ranks hold 7*1 + 0 = 7 each.
  const auto v8 = uneven_chunk_split(126, 16, 8);
  REQUIRE(v8.has_value());
  CHECK(v8->first_stage_layers == 7);
  CHECK(v8->last_stage_layers == 7);
  // vp 4: k = ceil(126/64) = 2, rest 126 - 62*2 = 2 -> 1 and 1 -> 3*2 + 1 = 7 each.
  CHECK(uneven_chunk_split(126, 16, 4)->first_stage_layers == 7);
  // vp 2: k = 4, rest 126 - 30*4 = 6 -> 3 and 3 -> 4 + 3 = 7 each.
  CHECK(uneven_chunk_split(126, 16, 2)->last_stage_layers == 7);
  // pp 8, vp 8: k = 2, rest 126 - 62*2 = 2 -> 1 and 1 -> 7*2 + 1 = 15 each.
  CHECK(uneven_chunk_split(126, 8, 8)->first_stage_layers == 15);
  // pp 2, vp 4 (2 divides 126 but 8 does not): k = 16, rest 126 - 6*16 = 30 -> 15 and 15 ->
  // 3*16 + 15 = 63 each.
  CHECK(uneven_chunk_split(126, 2, 4)->first_stage_layers == 63);
  // 7 and 9: first takes the smaller half. 30 layers, pp 4, vp 2: k = 4, rest 30 - 6*4 = 6
  // -> 3 and 3; 31 layers: rest 7 -> 3 and 4 -> 4 + 3 = 7, 4 + 4 = 8.
  CHECK(uneven_chunk_split(31, 4, 2)->first_stage_layers == 7);
  CHECK(uneven_chunk_split(31, 4, 2)->last_stage_layers == 8);
  // vp 1 is uneven_split.
  CHECK(uneven_chunk_split(126, 16, 1)->first_stage_layers == 7);
  // Divisible, too few layers (10 on 16 chunks: k = 1, rest 10 - 14 < 0), pp 1: nothing.
  CHECK_FALSE(uneven_chunk_split(128, 16, 8).has_value());
  CHECK_FALSE(uneven_chunk_split(10, 4, 4).has_value());
  CHECK_FALSE(uneven_chunk_split(126, 1, 4).has_value());
}

TEST_CASE("chunk_layers: per (rank, chunk) in virtual-stage order, stage_layers sums them") {
  using namespace tetra::model;
using namespace tetra::parallel;
  Model m;
  m.layers = 126;
  Layout l;
  l.pp = 16;
  l.vp = 8;
  l.first_stage_layers = 7;
  l.last_stage_layers = 7;
  // Llama 3 (arXiv 2407.21783 section 3.3.2): 128 chunks of 1 layer but the very first
  // (index 0) and the very last (index 127 = chunk 7 of rank 15) hold 0.
  const auto cl = chunk_layers(m, l);
  REQUIRE(cl.size() == 128);
  CHECK(cl[0] == 0);
  CHECK(cl[127] == 0);
  CHECK(cl[1] == 1);    // chunk 0 of rank 1
  CHECK(cl[16] == 1);   // chunk 1 of rank 0
  CHECK(cl[15] == 1);   // chunk 0 of rank 15
  CHECK(cl[112] == 1);  // chunk 7 of rank 0
  int sum = 0;
  for (int n : cl) sum += n;
  CHECK(sum == 126);
  const auto st = stage_layers(m, l);
  CHECK(st[0] == 7);
  CHECK(st[7] == 8);
  CHECK(st[15] == 7);
  // vp 4: k = 112/(14*4) = 2; the end chunks 7 - 3*2 = 1.
  l.vp = 4;
  const auto c4 = chunk_layers(m, l);
  CHECK(c4[0] == 1);
  CHECK(c4[63] == 1);
  CHECK(c4[16] == 2);
  CHECK(c4[5] == 2);
  // Even layout: every chunk L/(pp vp); vp 1: the rank counts.
  Layout e;
  e.pp = 4;
  e.vp = 2;
  m.layers = 32;
  for (int n : chunk_layers(m, e)) CHECK(n == 4);
  Layout u;
  u.pp = 16;
  u.first_stage_layers = 7;
  u.last_stage_layers = 7;
  m.layers = 126;
  const auto c1 = chunk_layers(m, u);
  CHECK(c1 == stage_layers(m, u));
  CHECK(c1[0] == 7);
  CHECK(c1[1] == 8);
  // Only the first rank fixed, vp 2: 120 over 15 ranks x 2 chunks -> k = 4; chunk 0 = 6 - 4.
  Layout f;
  f.pp = 16;
  f.vp = 2;
  f.first_stage_layers = 6;
  const auto cf = chunk_layers(m, f);
  CHECK(cf[0] == 2);
  CHECK(cf[16] == 4);
  CHECK(cf[31] == 4);
}
