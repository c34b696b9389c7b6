// The host data loader (costmodel/data_loader.hpp): the bytes behind one sample read off
// Megatron-Core's GPTDataset (`megatron/core/datasets/gpt_dataset.py`, core_r0.8:
// `_get_ltor_masks_and_position_ids` builds `torch.tril(torch.ones((s, s)))`, fp32, then
// `attention_mask < 0.5`; `__getitem__` caches the mask unless reset_position_ids,
// reset_attention_mask or eod_mask_loss is set) and PyTorch's DataLoader (collate into shared
// memory, the pin thread's copy), priced by hand.
#include <doctest/doctest.h>
#include "support/approx.hpp"

#include "tetra/costmodel/data_loader.hpp"

using tetra::test::approx;
using namespace tetra;

namespace {

parallel::Training megatron(int seq, std::optional<parallel::LoaderMask> mask) {
  parallel::Training t;
  t.seq_len = seq;
  t.framework = parallel::Framework::megatron;
  t.dataloader_mask = mask;
  return t;
}

parallel::Layout with_mbs(int mbs) {
  parallel::Layout l;
  l.mbs = mbs;
  return l;
}

}  // namespace

TEST_SUITE("costmodel") {

TEST_CASE("data loader: the host bytes of one sample of an 8192-token mask") {
  const double s2 = 8192.0 * 8192.0;  // 67,108,864
  // per_sample: ones 4 s², tril 4 s² (reads 4 s²), < 0.5 s² (reads 4 s²), stack s² (reads s²).
  const auto per = costmodel::loader_sample_bytes(parallel::LoaderMask::per_sample, 8192);
  CHECK(per.fresh == approx(671088640.0));     // 10 s²
  CHECK(per.resident == approx(603979776.0));  // 9 s²
  CHECK(per.pinned == approx(s2));
  const auto cached = costmodel::loader_sample_bytes(parallel::LoaderMask::cached, 8192);
  CHECK(cached.fresh == approx(s2));
  CHECK(cached.resident == approx(s2));
  CHECK(cached.pinned == approx(s2));
  const auto none = costmodel::loader_sample_bytes(parallel::LoaderMask::none, 8192);
  CHECK(none.fresh == 0);
  CHECK(none.resident == 0);
  CHECK(none.pinned == 0);
}

TEST_CASE("data loader: workers build whole micro-batches in parallel beside the pin thread") {
  const hw::Host host{2e9, 2e10};
  // s = 4096: s² = 16,777,216. One sample: 10 s² / 2e9 + 9 s² / 2e10 = 0.08388608 + 0.00754975
  // = 0.09143583 s; a micro-batch of 2 in one worker 0.18287166 s, two workers 0.09143583 s a
  // micro-batch. The pin thread: 2 s² / 2e10 = 0.00167772 s, not the slower.
  parallel::Training t = megatron(4096, parallel::LoaderMask::per_sample);
  CHECK(costmodel::loader_seconds_per_micro_batch(t, with_mbs(2), host) == approx(0.09143583).epsilon(1e-6));
  t.dataloader_workers = 1;
  CHECK(costmodel::loader_seconds_per_micro_batch(t, with_mbs(2), host) == approx(0.18287166).epsilon(1e-6));
  // No workers: the training process builds and pins in turn, 0.18287166 + 0.00167772.
  t.dataloader_workers = 0;
  CHECK(costmodel::loader_seconds_per_micro_batch(t, with_mbs(2), host) == approx(0.18454938).epsilon(1e-6));
  // Many workers: the pin thread's copy paces the loader.
  t.dataloader_workers = 1000;
  CHECK(costmodel::loader_seconds_per_micro_batch(t, with_mbs(2), host) == approx(0.00167772).epsilon(1e-5));
}

TEST_CASE("data loader: a kept mask costs its collate and pin copy, the default follows the framework") {
  const hw::Host host{2e9, 2e10};
  // cached, s = 4096, mbs 1, two workers: (s² / 2e9 + s² / 2e10) / 2 = 0.00461373 s against the
  // pin thread's s² / 2e10 = 0.00083886 s.
  parallel::Training t = megatron(4096, std::nullopt);
  CHECK(parallel::loader_mask(t) == parallel::LoaderMask::cached);
  CHECK(costmodel::loader_seconds_per_micro_batch(t, with_mbs(1), host) == approx(0.00461373).epsilon(1e-5));
  // torchtitan, llm-foundry and Aleph Alpha's trainer build no mask on the host.
  t.framework = parallel::Framework::fsdp;
  CHECK(parallel::loader_mask(t) == parallel::LoaderMask::none);
  CHECK(costmodel::loader_seconds_per_micro_batch(t, with_mbs(1), host) == 0);
  t.framework = parallel::Framework::deepspeed;
  CHECK(costmodel::loader_seconds_per_micro_batch(t, with_mbs(1), host) == 0);
  // Megatron-LM with --no-create-attention-mask-in-dataloader.
  t = megatron(4096, parallel::LoaderMask::none);
  CHECK(costmodel::loader_seconds_per_micro_batch(t, with_mbs(1), host) == 0);
}

TEST_CASE("data loader: the mask grows with the square of the sequence") {
  const hw::Host host;
  const parallel::Training t8 = megatron(8192, parallel::LoaderMask::per_sample);
  const parallel::Training t16 = megatron(16384, parallel::LoaderMask::per_sample);
  const double a = costmodel::loader_seconds_per_micro_batch(t8, with_mbs(1), host);
  const double b = costmodel::loader_seconds_per_micro_batch(t16, with_mbs(1), host);
  CHECK(b == approx(4.0 * a));
  // At the default host rates (2.73 GB/s first touch, 18.85 GB/s copy), two workers:
  // (10 s² / 2.73e9 + 9 s² / 18.85e9) / 2 at s = 16384 = (0.98328 + 0.12817) / 2 = 0.55572 s.
  CHECK(b == approx(0.55572).epsilon(1e-4));
}

}  // TEST_SUITE
