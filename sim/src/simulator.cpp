// The two levels wired to the op list and the cost models (docs/architecture.md, "Data flow"
// step 4).

#include "tetra/sim/simulator.hpp"

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>

#include "tetra/base/error.hpp"
#include "tetra/costmodel/collective.hpp"
#include "tetra/costmodel/compute.hpp"
#include "tetra/costmodel/memory.hpp"
#include "tetra/costmodel/offload.hpp"
#include "tetra/parallel/execution.hpp"
#include "tetra/parallel/flops.hpp"
#include "tetra/model/moe.hpp"
#include "tetra/ops/ops.hpp"
#include "tetra/parallel/params.hpp"

namespace tetra::sim {

SimInput sim_input(const model::Model& model, const hw::Cluster& cluster, const parallel::Training& training,
                   const parallel::Layout& layout, const costmodel::CostParams& costs) {
  SimInput in;
  in.model = &model;
  in.cluster = &cluster;
  in.training = &training;
  in.layout = layout;
  in.compute = &costs.compute;
  in.comm = &costs.comm;
  in.step_overhead_s = costs.step_overhead_s;
  return in;
}

namespace {

/// `seconds` as simulated time (a chunk's passes, a pipeline send, a gradient bucket, the
/// optimizer), or a UserError when one such span of the step would not fit in it
/// (a huge model on a slow link): the run is refused in one line, never an internal error.
Duration replay_time(double seconds) {
  if (!(seconds <= Duration::kMaxSeconds)) {
    throw UserError(SourceLocation{}, "",
                    "one part of the step would take " + std::to_string(static_cast<long long>(seconds)) +
                        " s (more than 10^7 s): the run is too large to simulate (a smaller model, faster "
                        "links or more parallelism)");
  }
  return Duration::from_seconds(seconds);
}

double pass_exposed(const PassTime& pt, CommAxis a) { return pt.exposed_s[static_cast<std::size_t>(a)]; }

/// Host time a rank's data loader needs for the step's micro-batches (costmodel/data_loader.hpp).
/// A step lasts at least this long, so run() and every bound of it take the larger of the two.
double data_loader_step_s(const SimInput& in) {
  const int m = std::max(parallel::micro_batches(in.layout, *in.training), 1);
  return m * costmodel::loader_seconds_per_micro_batch(*in.training, in.layout, in.cluster->host) /
         in.compute->host_factor;
}

/// Times of virtual stage `vs` (of V) holding `lc` layers for one micro-batch: the layer's
/// passes times lc, plus the embedding on the first and the head on the last virtual stage.
/// One definition for the replay (Simulator::run) and its bound (step_lower_bound).
ChunkCost chunk_cost(const LayerTimes& layer, const LayerTimes& embedding, const LayerTimes& head,
                     int lc, int vs, int V) {
  double f = lc * layer.forward.seconds;
  double bw = lc * layer.backward.seconds;
  double bi = lc * layer.backward_input.seconds;
  double w = lc * layer.backward_weight.seconds;
  if (vs == 0) {
    f += embedding.forward.seconds;
    bw += embedding.backward.seconds;
    bi += embedding.backward_input.seconds;
    w += embedding.backward_weight.seconds;
  }
  if (vs == V - 1) {
    f += head.forward.seconds;
    bw += head.backward.seconds;
    bi += head.backward_input.seconds;
    w += head.backward_weight.seconds;
  }
  ChunkCost cc;
  cc.forward = replay_time(f);
  cc.backward = replay_time(bw);
  cc.backward_input = replay_time(bi);
  cc.backward_weight = replay_time(w);
  return cc;
}

}  // namespace

namespace {

/// The longest one op may take: simulated time is int64 picoseconds (about 106 days), and a
/// step holds many ops times many micro-batches.
constexpr double kMaxOpSeconds = 1e4;

/// `seconds`, or a UserError when one op alone would take longer than kMaxOpSeconds.
double checked_op_seconds(const ops::Op& op, double seconds) {
  if (!(seconds <= kMaxOpSeconds)) {
    throw UserError(SourceLocation{}, "",
                    std::string("one ") + op.name + " would take " + std::to_string(static_cast<long long>(seconds)) +
                        " s (more than 10^4 s): the run is too large to simulate (shorter sequences or more "
                        "parallelism)");
  }
  return seconds;
}

/// The busiest GPU of a step may work at most this long in the simulated replay (at most
/// kMaxSimulatedMicroBatches micro-batches; longer steps are extrapolated from it).
constexpr double kMaxReplaySeconds = 1e6;

/// Refuses a spec whose replay would run a GPU longer than kMaxReplaySeconds.
void check_replay_length(const StepSpec& spec) {
  const double m = std::min(spec.m, kMaxSimulatedMicroBatches);
  for (const StageSpec& st : spec.stages) {
    double busy = st.optimizer.seconds();
    for (const ChunkCost& c : st.chunks) busy += m * (c.forward.seconds() + c.backward.seconds());
    if (busy > kMaxReplaySeconds) {
      throw UserError(SourceLocation{}, "",
                      "one step would keep a GPU busy for more than 10^6 s (" + std::to_string(static_cast<long long>(busy)) +
                          " s in " + std::to_string(static_cast<int>(m)) +
                          " micro-batches): the run is too large to simulate");
    }
  }
}

}  // namespace

OpPricer Simulator::pricer(const SimInput& in) {
  // Communication prices of this run by op shape: comm_op_seconds reads only (kind, coll,
  // dim, group, bytes, and a dispatch's routing, whose experts are the model's), and the DP
  // buckets of a stage and the middle stages repeat each other, so most DP prices repeat (the
  // top hot spot of `tetrasim search`).
  comm_memo_.clear();
  const costmodel::ComputeParams* cp = in.compute;
  const costmodel::CommParams* cm = in.comm;
  const parallel::Layout* layout = &in.layout;
  return [this, cp, cm, layout](const ops::Op& op) {
    if (op.is_compute()) return checked_op_seconds(op, costmodel::op_seconds(op, *cp));
    for (const auto& c : comm_memo_) {
      if (c.kind == op.kind && c.coll == op.coll && c.dim == op.dim && c.group == op.group &&
          c.route_topk == op.route_topk && c.route_backend == op.route_backend && c.bytes == op.bytes) {
        return c.seconds;
      }
    }
    const double s = checked_op_seconds(op, costmodel::comm_op_seconds(op, *layout, *cm));
    comm_memo_.push_back({op.kind, op.coll, op.dim, op.group, op.route_topk, op.route_backend, op.bytes, s});
    return s;
  };
}

void Simulator::price_layers(const SimInput& in, const SimOptions& options, const OpPricer& price) {
  const model::Model& model = *in.model;
  const hw::Cluster& cluster = *in.cluster;
  // The kernels as they run on this GPU (the FP8 copies its GEMMs need).
  parallel::Training training = *in.training;
  training.fp8 = parallel::fp8_on(training.fp8, cluster.gpu);
  const parallel::Layout& layout = in.layout;
  const bool record = options.record_trace;
  // SM sharing: NCCL runs one thread block per channel on the SMs of the GPU
  // (`NVIDIA/nccl: src/enqueue.cc`, one CTA per channel), so compute overlapped with a
  // collective runs on the remaining SMs: compute slows down while communication kernels
  // share the SMs. Channels as NCCL's search finds them.
  const int domain = cluster.nvlink_domain();  // NVLink peers: a node, or an NVL72 rack
  const double sms = std::max(in.compute->sms, 1);
  const auto intra = costmodel::ring_graph(in.comm->topo, domain, 1);
  const double intra_share = std::min(0.5, std::max(intra.channels, 0) / sms);
  const double host_speed = in.compute->host_factor;
  const HostCost host{in.compute->host_kernel_s / host_speed, in.compute->host_sync_s / host_speed,
                      in.compute->host_resume_s / host_speed};
  // Layer level: one replay per distinct op list.
  // Shared with earlier runs of the same per-layer shape through options.layer_cache.
  LayerCache* cache = record ? nullptr : options.layer_cache;
  const LayerKey key = cache != nullptr ? layer_key(training, layout, domain, in.comm->pods) : LayerKey{};
  const auto shared = cache != nullptr ? cache->find(key) : nullptr;
  moe_ = model.is_moe();
  if (shared) {
    layer_ = shared->layer;
    embedding_ = shared->embedding;
    head_ = shared->head;
    moe_layer_ = shared->moe_layer;
  } else {
    // A stage may hold dense and MoE layers (first_k_dense, interleaved MoE layers): each
    // kind is replayed on its own and summed per chunk in build_spec.
    auto replay_kinds = [&](bool moe) {
      std::vector<std::pair<LayerTimes, double>> kinds;
      for (const parallel::BlockKind& kind : parallel::block_kinds(layout)) {
        parallel::Layout one = layout;
        one.recompute = kind.recompute;
        const auto ops = moe ? ops::moe_layer_ops(model, training, one) : ops::layer_ops(model, training, one);
        kinds.emplace_back(replay_layer(ops, price, record, intra_share, host), kind.share);
      }
      return blend(kinds);
    };
    layer_ = replay_kinds(false);
    moe_layer_ = moe_ ? replay_kinds(true) : layer_;
    // The embedding and the head run once per micro-batch beside many layers: the host,
    // ahead of the GPU there, issues their few kernels on slack the layers left it.
    embedding_ = replay_layer(ops::embedding_ops(model, training, layout), price, record, intra_share);
    head_ = replay_layer(ops::head_ops(model, training, layout), price, record, intra_share);
    if (cache != nullptr) cache->insert(key, LayerTables{layer_, embedding_, head_, moe_layer_});
  }
}

void Simulator::prepare_untraced(const SimInput& in, const SimOptions& options) {
  SimOptions no_trace = options;
  no_trace.record_trace = false;
  kept_.reset();
  const OpPricer price = pricer(in);
  price_layers(in, no_trace, price);
  build_spec(in, no_trace, price);
}

double Simulator::step_estimate(const SimInput& in, const SimOptions& options) {
  prepare_untraced(in, options);
  return std::max(sim::step_lower_bound(spec_) + in.step_overhead_s, data_loader_step_s(in));
}

std::pair<int, int> Simulator::extrapolation_sizes(parallel::Schedule schedule, int p) noexcept {
  const int unit = schedule == parallel::Schedule::interleaved ? p : 1;
  const int m2 = std::max(unit, (kMaxSimulatedMicroBatches / unit) * unit);
  const int m1 = std::max(unit, (m2 / 2 / unit) * unit);
  return {m1, m2};
}

bool Simulator::Kept::matches(const SimInput& in) const {
  return model == in.model && cluster == in.cluster && training == in.training && compute == in.compute &&
         comm == in.comm && layout == in.layout;
}

double Simulator::step_lower_bound(const SimInput& in, const SimOptions& options, double enough) {
  const parallel::Layout& layout = in.layout;
  const int p = std::max(layout.pp, 1);
  const int m = std::max(parallel::micro_batches(layout, *in.training), 1);
  prepare_untraced(in, options);
  const double loader = data_loader_step_s(in);
  if (m <= kMaxSimulatedMicroBatches) return std::max(sim::step_lower_bound(spec_) + in.step_overhead_s, loader);
  // run() extrapolates from replays of m1 < m2 micro-batches: s = s2 + (s2 − s1)·k, k ≥ 0.
  // With s2 ≥ b2, the bound of the m2 replay, and s1 ≤ u1, any upper bound of the m1 replay,
  // s ≥ b2 + (b2 − u1)·k (each operation is monotone in s2 and in s1).
  const auto [m1, m2] = extrapolation_sizes(layout.schedule, p);
  const double k = static_cast<double>(m - m2) / static_cast<double>(m2 - m1);
  spec_.m = m2;
  const double b2 = sim::step_lower_bound(spec_);
  auto bound = [&](double u1) {
    return std::max(std::max(0.0, (b2 + (b2 - u1) * k) * (1.0 - 1e-9)) + in.step_overhead_s, loader);
  };
  // First u1 from the m1 step's graph alone (a tenth of a replay): often enough to rule the
  // layout out.
  spec_.m = m1;
  const double cheap = bound(sim::step_upper_bound(spec_, graph_));
  if (cheap > enough) {
    spec_.m = m;
    return cheap;
  }
  // Else the m1 replay itself (s1), kept for the run() that may follow.
  kept_ = Kept{in.model, in.cluster, in.training, in.compute, in.comm, layout,
               simulate_step(spec_, graph_, engine_, queue_)};
  spec_.m = m;
  return std::max(cheap, bound(kept_->first.step_time_s));
}

double Simulator::step_upper_bound(const SimInput& in, const SimOptions& options) {
  const parallel::Layout& layout = in.layout;
  const int p = std::max(layout.pp, 1);
  const int m = std::max(parallel::micro_batches(layout, *in.training), 1);
  prepare_untraced(in, options);
  double u = 0;
  if (m <= kMaxSimulatedMicroBatches) {
    u = sim::step_upper_bound(spec_, graph_);
  } else {
    // s = (1 + k)·s2 − k·s1 ≤ (1 + k)·u2 − k·b1.
    const auto [m1, m2] = extrapolation_sizes(layout.schedule, p);
    const double k = static_cast<double>(m - m2) / static_cast<double>(m2 - m1);
    spec_.m = m1;
    const double b1 = sim::step_lower_bound(spec_);
    spec_.m = m2;
    const double u2 = sim::step_upper_bound(spec_, graph_);
    spec_.m = m;
    u = (u2 + (u2 - b1) * k) * (1.0 + 1e-9);
  }
  return std::max(u + in.step_overhead_s, data_loader_step_s(in));
}

namespace {

/// Whether a stage's DP x CP gradient group and its CP group span nodes.
struct GroupsInterNode {
  bool dp = false;
  bool cp = false;
};

// An oversubscribed fabric: a boundary whose stages lie in different pods sends through the
// layer above them, every GPU of the stage at once (costmodel::cross_pod_p2p_seconds); the
// pod with the most GPUs sending across sets the boundary's pace.
void pods_on_boundaries(StepSpec& spec, const parallel::Layout& layout, int p, long long pp_stride, double bytes,
                        const costmodel::CommParams& cm) {
  const long long pod = cm.pods.gpus;
  const long long world = layout.world();
  if (pod <= 0 || pod >= world || cm.pods.oversubscription <= 1.0) return;
  // Stages and pods repeat every lcm(p * stride, pod) ranks, so one period holds every pod's
  // count; past 2^22 ranks the count stops, a bound on the work whatever the grid.
  const long long cycle = static_cast<long long>(p) * pp_stride;
  const long long g = std::gcd(cycle, pod);
  const long long period = cycle / g > world / pod ? world : cycle / g * pod;
  const long long span = std::min({world, period, 1LL << 22});
  const long long pods = (span + pod - 1) / pod;
  std::vector<long long> senders(static_cast<std::size_t>(p) * static_cast<std::size_t>(pods), 0);
  for (long long x = 0; x < span; ++x) {
    const int r = static_cast<int>((x / pp_stride) % p);
    const long long peer = r + 1 < p ? x + pp_stride : x - static_cast<long long>(p - 1) * pp_stride;
    if (peer / pod != x / pod) ++senders[static_cast<std::size_t>(r * pods + x / pod)];
  }
  bool any = false;
  std::vector<Duration> at(static_cast<std::size_t>(p), spec.pp_forward);
  for (int r = 0; r < p; ++r) {
    const auto first = senders.begin() + static_cast<std::ptrdiff_t>(r * pods);
    const long long most = *std::max_element(first, first + static_cast<std::ptrdiff_t>(pods));
    if (most == 0) continue;
    const Duration d = replay_time(costmodel::cross_pod_p2p_seconds(bytes, most, cm));
    if (d > at[static_cast<std::size_t>(r)]) {
      at[static_cast<std::size_t>(r)] = d;
      any = true;
    }
  }
  if (any) spec.pp_boundary_transfer = std::move(at);
}

// Placement: PP neighbours and the DP x CP gradient group, into the step's links (which PP
// boundaries cross nodes, the PP transfer times) and the SM share of its DP collectives.
GroupsInterNode place_step(StepSpec& spec, const SimInput& in, int domain, int p) {
  const model::Model& model = *in.model;
  const parallel::Training& training = *in.training;
  const parallel::Layout& layout = in.layout;
  const costmodel::CommParams& cm = *in.comm;
  const double sms = std::max(in.compute->sms, 1);
  const long long pp_stride = costmodel::rank_stride(layout, ops::CommDim::pp);
  spec.pp_inter_node.assign(static_cast<std::size_t>(p), 1);
  for (int r = 0; r < p; ++r) {
    const long long a = static_cast<long long>(r) * pp_stride / domain;
    const long long b = static_cast<long long>((r + 1) % p) * pp_stride / domain;
    spec.pp_inter_node[static_cast<std::size_t>(r)] = a != b ? 1 : 0;
  }
  const auto dp_place = costmodel::place_group(layout, ops::CommDim::dp_cp, domain);
  const auto cp_place = costmodel::place_group(layout, ops::CommDim::cp, domain);
  const auto dp_graph = costmodel::ring_graph(cm.topo, dp_place.ranks_per_node, dp_place.nodes);
  spec.comm_sm_share = std::min(0.5, std::max(dp_graph.channels, 0) / sms);
  if (p > 1) {
    const double bytes = ops::pp_boundary_bytes(model, training, layout);
    const bool any_inter = std::any_of(spec.pp_inter_node.begin(), spec.pp_inter_node.begin() + (p - 1),
                                       [](char c) { return c != 0; });
    spec.pp_forward = replay_time(costmodel::p2p_seconds(bytes, !any_inter, cm));
    spec.pp_backward = spec.pp_forward;
    pods_on_boundaries(spec, layout, p, pp_stride, bytes, cm);
  }
  return {dp_place.nodes > 1, cp_place.nodes > 1};
}

// MoE models: the passes of each chunk summed over its dense and MoE layers (the first
// layer of virtual stage vs is the sum of the layers of the chunks before it), into `out`.
void moe_chunk_times(const model::Model& model, const std::vector<int>& virtual_layers, int V,
                     const LayerTimes& layer, const LayerTimes& moe_layer, const LayerTimes& head,
                     std::vector<LayerTimes>& out) {
  int first = 0;
  for (int vs = 0; vs < V; ++vs) {
    const int lc = virtual_layers.at(static_cast<std::size_t>(vs));
    const int moe_layers = model::moe_layers_in(model, first, lc);
    // Multi-token prediction (DeepSeek-V3, Megatron-Core `mtp_num_layers`): each module runs
    // one more transformer layer, of the kind of the model's last layer, and a second LM head
    // with its loss after the last layer.
    const double mtp = vs == V - 1 ? std::max(0, model.mtp_layers) : 0;
    const bool mtp_moe = model::is_moe_layer(model, model.layers - 1);
    const double dense_n = static_cast<double>(lc - moe_layers) + (mtp_moe ? 0.0 : mtp);
    const double moe_n = static_cast<double>(moe_layers) + (mtp_moe ? mtp : 0.0);
    out.push_back(blend({{layer, dense_n}, {moe_layer, moe_n}, {head, mtp}}));
    first += lc;
  }
}

// What a forward pass of each virtual stage runs in order, for the trace: 'e' the embedding
// on the first, its layers ('m' with routed experts, 'd' without), on the last the
// multi-token-prediction modules of a MoE model (a layer of the last layer's kind and a head
// each, as moe_chunk_times counts them) and the head 'h'.
std::vector<std::string> forward_blocks(const model::Model& model, const std::vector<int>& virtual_layers, bool moe) {
  const std::size_t V = virtual_layers.size();
  std::vector<std::string> out;
  int first = 0;
  for (std::size_t vs = 0; vs < V; ++vs) {
    std::string b = vs == 0 ? "e" : "";
    const int lc = virtual_layers[vs];
    for (int l = first; l < first + lc; ++l) b += model::is_moe_layer(model, l) ? 'm' : 'd';
    if (vs + 1 == V) {
      const char last = model::is_moe_layer(model, model.layers - 1) ? 'm' : 'd';
      for (int k = 0; moe && k < model.mtp_layers; ++k) b += std::string{last, 'h'};
      b += 'h';
    }
    first += lc;
    out.push_back(std::move(b));
  }
  return out;
}

/// A stage's DP collectives, one op per bucket and chunk.
struct DpCollectives {
  std::vector<ops::Op> reduces, gathers, replica_reduces;
};

// The DP collectives of stage r split into single buckets of one chunk (each chunk has its
// own gradient buffer) by role.
DpCollectives dp_collectives(const SimInput& in, int r, int v, bool moe) {
  const model::Model& model = *in.model;
  const parallel::Training& training = *in.training;
  const parallel::Layout& layout = in.layout;
  auto dp_ops = ops::dp_gradient_ops(model, training, layout, r);
  if (moe) {
    // Expert buckets after the dense ones, on the same DP stream (Megatron-Core issues both
    // buffers' bucket groups from the backward hooks).
    const auto expert_ops = ops::expert_gradient_ops(model, training, layout, r);
    dp_ops.insert(dp_ops.end(), expert_ops.begin(), expert_ops.end());
  }
  // HSDP's replica all-reduces follow the reduce-scatter of the same bucket on its stream.
  DpCollectives out;
  for (const auto& op : dp_ops) {
    if (op.kind != ops::OpKind::collective) continue;
    for (int k = 0; k < std::max(op.count, 1); ++k) {
      ops::Op one = op;
      one.count = 1;
      one.bytes = op.bytes / v;
      if (op.coll == ops::CollectiveKind::all_gather) {
        out.gathers.push_back(one);
      } else if (op.dim == ops::CommDim::dp_replicate) {
        out.replica_reduces.push_back(one);
      } else if (op.coll == ops::CollectiveKind::reduce_scatter ||
                 op.coll == ops::CollectiveKind::all_reduce) {
        out.reduces.push_back(one);
      }
    }
  }
  return out;
}

// The DP buckets of one chunk of stage r, priced (none without DP reductions).
std::vector<BucketCost> dp_buckets(const SimInput& in, int r, int v, bool moe, const OpPricer& price) {
  DpCollectives dc = dp_collectives(in, r, v, moe);
  auto& reduces = dc.reduces;
  const auto& gathers = dc.gathers;
  const auto& replica_reduces = dc.replica_reduces;
  std::vector<double> follow_s(reduces.size(), 0.0);
  if (reduces.empty()) {
    reduces = replica_reduces;  // HSDP with one rank per shard group: all-reduce only
    follow_s.assign(reduces.size(), 0.0);
  } else if (replica_reduces.size() == reduces.size()) {
    for (std::size_t k = 0; k < reduces.size(); ++k) follow_s[k] = price(replica_reduces[k]);
  }
  std::vector<BucketCost> bk;
  if (reduces.empty()) return bk;
  double total = 0;
  for (const auto& op : reduces) total += op.bytes;
  double gather_total = 0;
  for (const auto& op : gathers) gather_total += price(op);
  for (std::size_t k = 0; k < reduces.size(); ++k) {
    BucketCost b;
    b.params_fraction = total > 0 ? reduces[k].bytes / total : 1.0 / static_cast<double>(reduces.size());
    b.reduce = replay_time(price(reduces[k]) + follow_s[k]);
    if (gathers.size() == reduces.size()) {
      b.gather = replay_time(price(gathers[k]));
    } else {
      b.gather = replay_time(gather_total * b.params_fraction);
    }
    bk.push_back(b);
  }
  return bk;
}

}  // namespace

void Simulator::add_offload_exposure(const SimInput& in, const LayerTimes& lt, int k, int lc, ChunkCost& cc) {
  // Activation offloading (pp = 1, one chunk: parallel::check_layout): the copies a layer's
  // compute cannot hide, per micro-batch (costmodel/offload.hpp).
  if (in.layout.offload_layers <= 0 || lc <= 0) return;
  const double bytes = costmodel::offloaded_bytes_per_layer(*in.model, *in.cluster, *in.training, in.layout);
  const double per_layer = static_cast<double>(k) / lc;
  const costmodel::OffloadExposure e = costmodel::offload_exposure(
      lc, in.layout.offload_layers, bytes, costmodel::host_copy_Bps(in.cluster->gpu),
      per_layer * lt.forward.seconds, per_layer * lt.backward.seconds);
  cc.forward = replay_time(cc.forward.seconds() + e.forward_s);
  cc.backward = replay_time(cc.backward.seconds() + e.backward_s);
  cc.backward_input = replay_time(cc.backward_input.seconds() + e.backward_s);
  offload_exposed_s_ += e.forward_s + e.backward_s;
}

void Simulator::build_spec(const SimInput& in, const SimOptions& options, const OpPricer& price) {
  const model::Model& model = *in.model;
  const hw::Cluster& cluster = *in.cluster;
  const parallel::Training& training = *in.training;
  const parallel::Layout& layout = in.layout;
  const bool record = options.record_trace;
  const int domain = cluster.nvlink_domain();  // NVLink peers: a node, or an NVL72 rack

  const int p = std::max(layout.pp, 1);
  const int v = std::max(layout.vp, 1);
  const int m = std::max(parallel::micro_batches(layout, training), 1);
  const int V = p * v;
  p_ = p;
  v_ = v;
  // Layers per model chunk (virtual-stage order); uneven ends may leave the first or the last
  // chunk with the embedding or the head only (parallel::chunk_layers, arXiv 2407.21783 §3.3.2).
  const auto virtual_layers = parallel::chunk_layers(model, layout);
  const double act_layer = costmodel::activation_bytes_per_layer(model, training, layout);

  spec_ = StepSpec{};
  spec_.schedule = layout.schedule;
  spec_.p = p;
  spec_.v = v;
  spec_.m = m;
  // What overlaps the framework allows (parallel::ExecutionTraits; the DeepSpeed-style trainer
  // reduces on the compute stream, ops::dp_gradient_ops).
  const parallel::ExecutionTraits traits = parallel::execution_traits(training, layout);
  spec_.overlap_grad_reduce = traits.overlap_grad_reduce;
  spec_.overlap_param_gather = traits.overlap_param_gather;
  spec_.record_memory = record;
  chunk_layers_.assign(static_cast<std::size_t>(V), 0);
  offload_exposed_s_ = 0;
  const GroupsInterNode inter_node = place_step(spec_, in, domain, p);
  chunk_times_.clear();
  if (moe_) moe_chunk_times(model, virtual_layers, V, layer_, moe_layer_, head_, chunk_times_);
  trace_blocks_.clear();
  if (record) trace_blocks_ = forward_blocks(model, virtual_layers, moe_);
  for (int r = 0; r < p; ++r) {
    StageSpec st;
    for (int c = 0; c < v; ++c) {
      const int vs = c * p + r;
      const int lc = virtual_layers.at(static_cast<std::size_t>(vs));
      chunk_layers_[static_cast<std::size_t>(vs)] = lc;
      // Dense models: lc times the one layer; MoE models: the chunk's summed layers.
      const LayerTimes& lt = moe_ ? chunk_times_[static_cast<std::size_t>(vs)] : layer_;
      const int k = moe_ ? 1 : lc;
      ChunkCost cc = chunk_cost(lt, embedding_, head_, k, vs, V);
      cc.activation_bytes = lc * act_layer;
      add_offload_exposure(in, lt, k, lc, cc);
      constexpr auto kCp = static_cast<std::size_t>(CommAxis::cp);
      cc.cp_forward_s = k * lt.forward.comm_s[kCp];
      cc.cp_backward_s = k * lt.backward.comm_s[kCp];
      cc.cp_backward_input_s = k * lt.backward_input.comm_s[kCp];
      st.chunks.push_back(cc);
    }
    // The same DP buckets for every chunk of the stage.
    const std::vector<BucketCost> bk = dp_buckets(in, r, v, moe_, price);
    if (!bk.empty()) st.buckets.assign(static_cast<std::size_t>(v), bk);
    double opt = 0;
    for (const auto& op : ops::optimizer_ops(model, training, layout, r)) {
      opt += price(op) * std::max(op.count, 1);
    }
    st.optimizer = replay_time(opt);
    st.dp_inter_node = inter_node.dp;
    st.cp_inter_node = inter_node.cp;
    spec_.stages.push_back(std::move(st));
  }
}

namespace {

/// Extends the steady state of a step replayed at m2 micro-batches, against the same step at
/// m1, linearly to m; warm-up, cool-down, DP and optimizer tails stay as simulated.
void extrapolate_step(const StepOutcome& a, StepOutcome& step, int m1, int m2, int m, parallel::Schedule schedule) {
  const double k = static_cast<double>(m - m2) / static_cast<double>(m2 - m1);
  auto ext = [k](double x1, double x2) { return x2 + (x2 - x1) * k; };
  step.step_time_s = ext(a.step_time_s, step.step_time_s);
  step.pipeline_span_s = ext(a.pipeline_span_s, step.pipeline_span_s);
  double bubble = 0;
  const bool all_in_flight = schedule == parallel::Schedule::gpipe ||
                             schedule == parallel::Schedule::layered;
  for (std::size_t r = 0; r < step.stages.size(); ++r) {
    auto& so = step.stages[r];
    const auto& sa = a.stages[r];
    so.busy_s = ext(sa.busy_s, so.busy_s);
    so.pipeline_busy_s = ext(sa.pipeline_busy_s, so.pipeline_busy_s);
    so.exposed_pp_s = ext(sa.exposed_pp_s, so.exposed_pp_s);
    so.idle_s = std::max(0.0, step.step_time_s - so.busy_s);
    if (all_in_flight) {
      so.inflight = ext(sa.inflight, so.inflight);
      so.peak_activation_bytes = ext(sa.peak_activation_bytes, so.peak_activation_bytes);
    }
    if (step.pipeline_span_s > 0) bubble += (step.pipeline_span_s - so.pipeline_busy_s) / step.pipeline_span_s;
  }
  step.bubble_fraction = step.stages.empty() ? 0 : std::max(0.0, bubble / static_cast<double>(step.stages.size()));
}

// Memory: the memory model at the in-flight counts the timeline found; then each of the p
// stages' result (rank_layers: the layers of each rank).
void add_memory_and_stages(Result& res, const SimInput& in, const SimOptions& options, const StepOutcome& step,
                           const std::vector<int>& rank_layers, int p) {
  costmodel::MemoryOptions mo;
  mo.memory_fraction = options.memory_fraction;
  for (const auto& so : step.stages) mo.inflight.push_back(so.inflight);
  res.memory = costmodel::estimate_memory(*in.model, *in.cluster, *in.training, in.layout, mo);
  res.fits = res.memory.fits;
  res.peak_bytes = res.memory.peak_bytes;
  for (int r = 0; r < p; ++r) {
    StageResult sr;
    sr.stage = r;
    sr.layers = rank_layers.at(static_cast<std::size_t>(r));
    const auto& so = step.stages[static_cast<std::size_t>(r)];
    sr.busy_s = so.busy_s;
    sr.idle_s = so.idle_s + in.step_overhead_s + res.data_loader_wait_s;
    sr.inflight = so.inflight;
    if (static_cast<std::size_t>(r) < res.memory.stages.size()) {
      const auto& sm = res.memory.stages[static_cast<std::size_t>(r)];
      sr.peak_bytes = sm.reserved_bytes;
    }
    res.stages.push_back(sr);
  }
}

// EP traffic of stage r (of p, v chunks each) in a step of m micro-batches: each pass of
// each chunk through its MoE layers (the chunk sums of moe_chunk_times), overlapped or not.
double stage_ep_comm_s(const std::vector<LayerTimes>& chunk_times, int r, int p, int v, int m, bool zb) {
  constexpr auto kEp = static_cast<std::size_t>(CommAxis::ep);
  double s = 0;
  for (int c = 0; c < v && !chunk_times.empty(); ++c) {
    const LayerTimes& lt = chunk_times[static_cast<std::size_t>(c * p + r)];
    s += lt.forward.comm_s[kEp] +
         (zb ? lt.backward_input.comm_s[kEp] + lt.backward_weight.comm_s[kEp] : lt.backward.comm_s[kEp]);
  }
  return m * s;
}

}  // namespace

Result Simulator::run(const SimInput& in, const SimOptions& options) {
  const model::Model& model = *in.model;
  const hw::Cluster& cluster = *in.cluster;
  const parallel::Training& training = *in.training;
  const parallel::Layout& layout = in.layout;
  const bool record = options.record_trace;

  // A first replay kept by step_lower_bound serves only the run that directly follows it.
  std::optional<Kept> kept = std::move(kept_);
  kept_.reset();
  const OpPricer price = pricer(in);
  price_layers(in, options, price);
  build_spec(in, options, price);
  check_replay_length(spec_);
  const int p = p_;
  const int v = v_;
  const int m = spec_.m;
  const int V = p * v;
  const auto rank_layers = parallel::stage_layers(model, layout);
  const bool zb = splits_backward(layout.schedule);

  if (m <= kMaxSimulatedMicroBatches) {
    step_ = simulate_step(spec_, graph_, engine_, queue_);
  } else {
    // Long horizons are extrapolated: replay two shorter steps of
    // m1 < m2 micro-batches (multiples of the schedule's group) and extend the steady state
    // linearly to m; warm-up, cool-down, DP and optimizer tails stay as simulated.
    const auto [m1, m2] = extrapolation_sizes(layout.schedule, p);
    StepOutcome a;
    if (kept && kept->matches(in) && !record) {
      a = std::move(kept->first);  // replayed by step_lower_bound for this input
    } else {
      spec_.m = m1;
      a = simulate_step(spec_, graph_, engine_, queue_);
    }
    spec_.m = m2;
    step_ = simulate_step(spec_, graph_, engine_, queue_);
    extrapolate_step(a, step_, m1, m2, m, layout.schedule);
    spec_.m = m;
  }
  recorded_ = record;

  Result res;
  res.layout = layout;
  res.micro_batches = m;
  res.events = step_.events;
  // A cluster's fixed per-step cost (costmodel::Factors) idles every stage, and so does
  // waiting for a data loader slower than the replayed step.
  const double replayed = step_.step_time_s + in.step_overhead_s;
  res.data_loader_s = data_loader_step_s(in);
  res.step_time_s = std::max(replayed, res.data_loader_s);
  res.data_loader_wait_s = res.step_time_s - replayed;
  res.bubble_fraction = step_.bubble_fraction;
  const double world = static_cast<double>(layout.world());
  const double tokens = static_cast<double>(training.global_batch) * training.seq_len;
  res.tokens_per_s = res.step_time_s > 0 ? tokens / res.step_time_s : 0;
  res.tokens_per_s_per_gpu = world > 0 ? res.tokens_per_s / world : 0;
  res.model_flops = parallel::spec_step_flops(model, training, layout);
  if (res.step_time_s > 0 && world > 0) {
    const double per_gpu = res.model_flops / res.step_time_s / world;
    res.tflops_per_gpu = per_gpu / 1e12;
    res.mfu = cluster.gpu.bf16_peak_flops > 0 ? per_gpu / cluster.gpu.bf16_peak_flops : 0;
  }
  res.offload_exposed_s = m * offload_exposed_s_;
  res.layer_forward_s = (moe_ ? moe_layer_ : layer_).forward.seconds;
  res.layer_backward_s = (moe_ ? moe_layer_ : layer_).backward.seconds;

  // Exposed TP / CP: per stage, every pass of every task (the most exposed stage).
  for (int r = 0; r < p; ++r) {
    double tp = 0, cpx = 0, epx = 0, host = 0;
    for (int c = 0; c < v; ++c) {
      const int vs = c * p + r;
      const double lc = chunk_layers_[static_cast<std::size_t>(vs)];
      auto waited = [&](const LayerTimes& lt, double k) {
        return k * (lt.forward.host_s + (zb ? lt.backward_input.host_s + lt.backward_weight.host_s
                                            : lt.backward.host_s));
      };
      host += m * (moe_ ? waited(chunk_times_[static_cast<std::size_t>(vs)], 1) : waited(layer_, lc));
      for (CommAxis a : {CommAxis::tp, CommAxis::cp, CommAxis::ep}) {
        auto sum = [&](const LayerTimes& lt, double k) {
          double x = pass_exposed(lt.forward, a);
          x += zb ? pass_exposed(lt.backward_input, a) + pass_exposed(lt.backward_weight, a)
                  : pass_exposed(lt.backward, a);
          return k * x;
        };
        double x = moe_ ? sum(chunk_times_[static_cast<std::size_t>(vs)], 1) : sum(layer_, lc);
        if (vs == 0) x += sum(embedding_, 1);
        if (vs == V - 1) x += sum(head_, 1);
        (a == CommAxis::tp ? tp : a == CommAxis::cp ? cpx : epx) += m * x;
      }
    }
    const auto& so = step_.stages[static_cast<std::size_t>(r)];
    res.exposed.tp = std::max(res.exposed.tp, tp);
    res.exposed.ep = std::max(res.exposed.ep, epx);
    res.host_wait_s = std::max(res.host_wait_s, host);
    res.exposed.cp = std::max(res.exposed.cp, cpx + so.exposed_cp_s);
    res.exposed.pp = std::max(res.exposed.pp, so.exposed_pp_s);
    res.exposed.dp = std::max(res.exposed.dp, so.exposed_dp_s);
  }

  add_memory_and_stages(res, in, options, step_, rank_layers, p);
  for (StageResult& sr : res.stages) sr.ep_comm_s = stage_ep_comm_s(chunk_times_, sr.stage, p, v, m, zb);
  stage_memory_ = res.memory.stages;
  return res;
}

Result simulate(const SimInput& in, const SimOptions& options) {
  Simulator s;
  return s.run(in, options);
}

}  // namespace tetra::sim
