#include "band.hpp"

#include <cmath>

#include "output.hpp"
#include "tetra/scenarios/profile_io.hpp"

namespace tetra::cli {

namespace {
std::string percentile(double q) { return std::to_string(static_cast<int>(std::lround(q * 100.0))); }
std::string ordinal(double q) { return percentile(q) + "th"; }
}  // namespace

costmodel::StepBand band_for(parallel::Framework framework, const fit::FitSummary* fit,
                             const std::string& fit_path) {
  if (fit != nullptr) return costmodel::fitted_band(fit->band, fit_path, framework);
  return costmodel::zero_shot_band(scenarios::builtin_error_bands(), framework);
}

nlohmann::json interval_json(const costmodel::StepBand& band, double predicted_s) {
  const auto iv = band.interval(predicted_s);
  if (!iv) return {{"low", nullptr}, {"high", nullptr}};
  return {{"low", round_to(iv->low_s, 6)}, {"high", round_to(iv->high_s, 6)}};
}

nlohmann::json band_source_json(const costmodel::StepBand& band) {
  nlohmann::json j;
  const bool ok = band.band.available();
  j["basis"] = band.basis;
  j["framework"] = band.regime;
  j["rows"] = band.band.rows;
  j["low_quantile"] = band.band.low_quantile;
  j["high_quantile"] = band.band.high_quantile;
  j["low_error"] = ok ? nlohmann::json(round_to(band.band.low_error, 6)) : nlohmann::json(nullptr);
  j["high_error"] = ok ? nlohmann::json(round_to(band.band.high_error, 6)) : nlohmann::json(nullptr);
  j["note"] = band.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(band.note);
  return j;
}

costmodel::StepBand band_from_json(const nlohmann::json& j) {
  costmodel::StepBand b;
  if (!j.is_object()) return b;
  auto text = [&](const char* key) { return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string(); };
  auto number = [&](const char* key, double fallback) {
    return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
  };
  b.basis = text("basis");
  b.regime = text("framework");
  b.note = text("note");
  b.band.rows = j.contains("rows") && j["rows"].is_number_unsigned() ? j["rows"].get<std::size_t>() : 0;
  b.band.low_quantile = number("low_quantile", b.band.low_quantile);
  b.band.high_quantile = number("high_quantile", b.band.high_quantile);
  b.band.low_error = number("low_error", 0.0);
  b.band.high_error = number("high_error", 0.0);
  return b;
}

nlohmann::json band_json(const costmodel::StepBand& band, double predicted_s) {
  nlohmann::json j = band_source_json(band);
  j.update(interval_json(band, predicted_s));
  return j;
}

std::string band_basis_text(const costmodel::StepBand& band) {
  if (!band.band.available()) return band.note;
  const std::string range = ordinal(band.band.low_quantile) + "-" + ordinal(band.band.high_quantile) +
                            " percentile of the signed errors on " + std::to_string(band.band.rows);
  if (band.basis == "fit") return range + " rows, cross-validated on the fitted file's rows";
  const auto f = parallel::parse_framework(band.regime);
  if (!f) return range + " published rows of every framework";
  return range + " published " + costmodel::regime_name(*f) + " rows";
}

std::string interval_text(const costmodel::StepBand& band, double predicted_s, int digits) {
  const auto iv = band.interval(predicted_s);
  if (!iv) return "-";
  return fixed(iv->low_s, digits) + " .. " + fixed(iv->high_s, digits) + " s";
}

}  // namespace tetra::cli
