#include "utilization.hpp"

#include <cctype>

#include "output.hpp"

namespace tetra::cli {

costmodel::Utilization ranked_utilization(const model::Model& model, const parallel::Training& training,
                                          const hw::Gpu& gpu, const search::RankedLayout& r) {
  parallel::Training t = training;
  t.fp8 = r.fp8;
  t.grad_dtype = r.grad_dtype;
  t.torch.compile = r.compile;
  return costmodel::utilization(model, t, r.layout, gpu, r.tflops_per_gpu * 1e12);
}

void add_utilization_json(nlohmann::json& j, const costmodel::Utilization& u, int decimals) {
  auto fraction = [&](double x) { return decimals >= 0 ? round_to(x, decimals) : x; };
  j["hfu"] = fraction(u.hfu);
  j["mfu_peak_precision"] = u.mfu_peak.precision;
  j["mfu_peak_tflops"] = round_to(u.mfu_peak.flops / 1e12, 3);
  j["precision_peak"] = u.precision_peak.precision;
  j["precision_peak_tflops"] = round_to(u.precision_peak.flops / 1e12, 3);
  j["precision_peak_utilization"] = fraction(u.precision_peak_utilization);
}

std::string peak_text(std::string_view precision, double tflops) {
  std::string name(precision);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name + " dense peak " + fixed(tflops, 0) + " TFLOP/s";
}

std::string peak_text(const costmodel::Peak& peak) { return peak_text(peak.precision, peak.flops / 1e12); }

bool other_precision(const costmodel::Utilization& u) {
  return std::string(u.precision_peak.precision) != u.mfu_peak.precision &&
         std::string(u.precision_peak.precision) != "fp16";
}

}  // namespace tetra::cli
