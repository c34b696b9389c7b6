#include "launcher_export.hpp"

#include "tetra/interop/export.hpp"

namespace tetra::cli {

CLI::Option* add_export_option(CLI::App* cmd, std::string& launcher) {
  return cmd
      ->add_option("--export", launcher,
                   "print the best layout as the launcher's configuration instead of the table: megatron "
                   "(torchrun + Megatron-LM flags), torchtitan (job TOML tables) or nemo (Megatron-Bridge YAML "
                   "overrides)")
      ->check(CLI::IsMember({"megatron", "torchtitan", "nemo"}));
}

std::string export_ranked(const std::string& launcher, const model::Model& model, const parallel::Training& training,
                          const hw::Cluster& cluster, const search::RankedLayout& r) {
  parallel::Training ranked = training;
  ranked.fp8 = r.fp8;
  if (r.fp8.enabled()) ranked.precision = parallel::Precision::bf16;
  ranked.torch.compile = r.compile;
  ranked.grad_dtype = r.grad_dtype;
  const interop::ExportInput in{model, ranked, r.layout, cluster.total_gpus(), cluster.gpus_per_node};
  return interop::export_layout(*interop::parse_launcher(launcher), in);
}

}  // namespace tetra::cli
