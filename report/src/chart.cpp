#include "chart.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>

#include "tetra/report/report.hpp"

namespace tetra::report {

std::string escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  std::array<char, 32> buf{};
  const auto res = std::to_chars(buf.data(), buf.data() + buf.size(), x);
  return std::string(buf.data(), res.ptr);
}

std::vector<double> linear_ticks(double lo, double hi, int target) {
  if (!(hi > lo) || target < 2) return {lo};
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  // Fewer than two ticks inside: halve the spacing until there are.
  std::vector<double> ticks;
  for (int tries = 0; tries < 4; ++tries) {
    ticks.clear();
    const double eps = step * 1e-9;
    for (double k = std::ceil((lo - eps) / step); k * step <= hi + eps; k += 1) {
      ticks.push_back(std::abs(k) < 0.5 ? 0.0 : k * step);
    }
    if (ticks.size() >= 2) break;
    step /= 2;
  }
  return ticks;
}

std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> ticks;
  if (!(lo > 0) || !(hi >= lo)) return ticks;
  const int first = static_cast<int>(std::floor(std::log10(lo)));
  const int last = static_cast<int>(std::ceil(std::log10(hi)));
  const bool fine = last - first <= 3;
  const double eps = 1e-9;
  for (int e = first; e <= last; ++e) {
    for (double m : fine ? std::vector<double>{1, 2, 5} : std::vector<double>{1}) {
      const double t = m * std::pow(10.0, e);
      if (t >= lo * (1 - eps) && t <= hi * (1 + eps)) ticks.push_back(t);
    }
  }
  if (ticks.size() < 2) ticks = {lo, hi};
  return ticks;
}

std::vector<Slice> merge_slices(std::vector<Slice> slices, double gap_s) {
  std::stable_sort(slices.begin(), slices.end(),
                   [](const Slice& a, const Slice& b) { return a.start_s < b.start_s; });
  std::vector<Slice> out;
  for (Slice& s : slices) {
    if (!out.empty() && out.back().kind == s.kind && s.start_s <= out.back().end_s + gap_s) {
      out.back().end_s = std::max(out.back().end_s, s.end_s);
      continue;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Slice> bin_slices(const std::vector<Slice>& slices, double t0, double t1, std::size_t bins) {
  if (bins == 0 || !(t1 > t0)) return {};
  const double w = (t1 - t0) / static_cast<double>(bins);
  std::vector<std::map<std::string, double>> busy(bins);  // per column: seconds per kind
  for (const Slice& s : slices) {
    const double a = std::max(s.start_s, t0), b = std::min(s.end_s, t1);
    if (!(b > a)) continue;
    const auto first = static_cast<std::size_t>((a - t0) / w);
    for (std::size_t k = std::min(first, bins - 1); k < bins; ++k) {
      const double lo = t0 + static_cast<double>(k) * w, hi = lo + w;
      if (lo >= b) break;
      busy[k][s.kind] += std::min(b, hi) - std::max(a, lo);
    }
  }
  std::vector<Slice> out;
  for (std::size_t k = 0; k < bins; ++k) {
    double total = 0, most = 0;
    const std::string* kind = nullptr;
    for (const auto& [name, t] : busy[k]) {
      total += t;
      if (t > most) {
        most = t;
        kind = &name;
      }
    }
    if (kind == nullptr || total < 0.5 * w) continue;
    const double lo = t0 + static_cast<double>(k) * w;
    out.push_back({lo, lo + w, *kind});
  }
  return merge_slices(std::move(out), w * 1e-6);
}

std::string gpu_colour(const std::string& gpu) {
  // Preset GPUs: one hue per generation, two shades where a generation has two parts.
  static const std::map<std::string, std::string> fixed{
      {"a100-sxm-40gb", "#88CCEE"}, {"a100-sxm-80gb", "#56B4E9"}, {"h100-sxm-80gb", "#0072B2"},
      {"h100-sxm-94gb", "#332288"}, {"h200-sxm-141gb", "#009E73"}, {"b200", "#E69F00"},
      {"b300", "#D55E00"},          {"gb200", "#CC79A7"},         {"gb300", "#882255"}};
  if (const auto it = fixed.find(gpu); it != fixed.end()) return it->second;
  // Other names: a colour from the name alone (FNV-1a), so that it is the same on every page.
  static const std::array<const char*, 6> others{"#117733", "#999933", "#44AA99", "#AA4499", "#661100", "#6699CC"};
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : gpu) h = (h ^ c) * 1099511628211ull;
  return others[h % others.size()];
}

namespace detail {

const std::string& palette(std::size_t i) {
  static const std::array<std::string, 10> colours{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9",
                                                   "#D55E00", "#882255", "#000000", "#999999", "#666666"};
  return colours[i % colours.size()];
}

Axis fit_axis(std::string label, const std::vector<double>& values, bool from_zero, double log_if_ratio) {
  Axis a;
  a.label = std::move(label);
  double lo = HUGE_VAL, hi = -HUGE_VAL;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (lo > hi) {  // nothing to show
    lo = 0;
    hi = 1;
  }
  if (log_if_ratio > 0 && lo > 0 && hi / lo > log_if_ratio) {
    a.log = true;
    a.lo = lo / 1.25;
    a.hi = hi * 1.25;
    return a;
  }
  if (from_zero) lo = std::min(lo, 0.0);
  if (hi == lo) {
    const double d = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= from_zero && lo == 0 ? 0 : d;
    hi += d;
  }
  const double pad = (hi - lo) * 0.05;
  a.lo = from_zero && lo >= 0 ? lo : lo - pad;
  a.hi = hi + pad;
  return a;
}

std::string tick_label(double value, double spacing) {
  if (value == 0) return "0";
  if (value == std::round(value) && std::abs(value) < 1e5 && std::abs(spacing) >= 1) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", value);
    return buf;
  }
  const double mag = std::max(std::abs(value), std::abs(spacing));
  double scale = 1;
  const char* suffix = "";
  if (mag >= 1e12) {
    scale = 1e12, suffix = "T";
  } else if (mag >= 1e9) {
    scale = 1e9, suffix = "G";
  } else if (mag >= 1e6) {
    scale = 1e6, suffix = "M";
  } else if (mag >= 1e4) {
    scale = 1e3, suffix = "k";
  }
  const double s = std::abs(spacing) / scale;
  int decimals = s > 0 ? std::max(0, static_cast<int>(std::ceil(-std::log10(s) - 1e-9))) : 0;
  decimals = std::min(decimals, 6);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f%s", decimals, value / scale, suffix);
  return buf;
}

Chart::Chart(std::string id, std::string title, Axis x, Axis y, double width, double height)
    : id_(std::move(id)), title_(std::move(title)), x_(std::move(x)), y_(std::move(y)), width_(width),
      height_(height) {
  if (!x_.show_ticks) x_.ticks.clear();
  if (!y_.show_ticks) y_.ticks.clear();
  if (x_.ticks.empty() && x_.show_ticks) x_.ticks = x_.log ? log_ticks(x_.lo, x_.hi) : linear_ticks(x_.lo, x_.hi);
  if (y_.ticks.empty() && y_.show_ticks) y_.ticks = y_.log ? log_ticks(y_.lo, y_.hi) : linear_ticks(y_.lo, y_.hi);
  marks_.precision(6);
  overlay_.precision(6);
}

namespace {
double unit(const Axis& a, double v) {
  if (a.log) return (std::log(v) - std::log(a.lo)) / (std::log(a.hi) - std::log(a.lo));
  return (v - a.lo) / (a.hi - a.lo);
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

/// Spacing of neighbouring ticks at `i` (for the number of decimals of its label).
double spacing_at(const std::vector<double>& t, std::size_t i) {
  if (t.size() < 2) return t.empty() ? 1 : std::abs(t[0]);
  return i + 1 < t.size() ? t[i + 1] - t[i] : t[i] - t[i - 1];
}
}  // namespace

double Chart::px(double x) const { return left_ + unit(x_, x) * (right() - left_); }
double Chart::py(double y) const { return bottom() - unit(y_, y) * (bottom() - top_); }

std::string Chart::svg(const std::vector<LegendEntry>& legend) const {
  std::ostringstream o;
  o << "<svg id=\"" << escape(id_) << "\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"" << fmt(width_)
    << "\" height=\"" << fmt(height_) << "\" viewBox=\"0 0 " << fmt(width_) << ' ' << fmt(height_)
    << "\" role=\"img\" aria-label=\"" << escape(title_) << "\">\n";
  o << "<defs><clipPath id=\"" << escape(id_) << "-clip\"><rect x=\"" << fmt(left_) << "\" y=\"" << fmt(top_)
    << "\" width=\"" << fmt(right() - left_) << "\" height=\"" << fmt(bottom() - top_) << "\"/></clipPath></defs>\n";
  o << "<text class=\"title\" x=\"" << fmt(left_) << "\" y=\"22\">" << escape(title_) << "</text>\n";
  // Grid and ticks.
  o << "<g class=\"axis\">\n";
  for (std::size_t i = 0; i < x_.ticks.size(); ++i) {
    const double v = x_.ticks[i];
    const double x = px(v);
    o << "<line class=\"grid\" x1=\"" << fmt(x) << "\" x2=\"" << fmt(x) << "\" y1=\"" << fmt(top_) << "\" y2=\""
      << fmt(bottom()) << "\"/><text class=\"tick\" x=\"" << fmt(x) << "\" y=\"" << fmt(bottom() + 16)
      << "\" text-anchor=\"middle\">" << escape(tick_label(v, x_.log ? v : spacing_at(x_.ticks, i))) << "</text>\n";
  }
  for (std::size_t i = 0; i < y_.ticks.size(); ++i) {
    const double v = y_.ticks[i];
    const double y = py(v);
    o << "<line class=\"grid\" x1=\"" << fmt(left_) << "\" x2=\"" << fmt(right()) << "\" y1=\"" << fmt(y) << "\" y2=\""
      << fmt(y) << "\"/><text class=\"tick\" x=\"" << fmt(left_ - 6) << "\" y=\"" << fmt(y + 4)
      << "\" text-anchor=\"end\">" << escape(tick_label(v, y_.log ? v : spacing_at(y_.ticks, i))) << "</text>\n";
  }
  o << "<rect class=\"frame\" x=\"" << fmt(left_) << "\" y=\"" << fmt(top_) << "\" width=\"" << fmt(right() - left_)
    << "\" height=\"" << fmt(bottom() - top_) << "\"/>\n";
  o << "<text class=\"label\" x=\"" << fmt((left_ + right()) / 2) << "\" y=\"" << fmt(height_ - 10)
    << "\" text-anchor=\"middle\">" << escape(x_.label) << (x_.log ? " (log scale)" : "") << "</text>\n";
  o << "<text class=\"label\" transform=\"translate(16," << fmt((top_ + bottom()) / 2)
    << ") rotate(-90)\" text-anchor=\"middle\">" << escape(y_.label) << (y_.log ? " (log scale)" : "") << "</text>\n";
  o << "</g>\n";
  o << "<g class=\"marks\" clip-path=\"url(#" << escape(id_) << "-clip)\">\n" << marks_.str() << "</g>\n";
  o << "<g class=\"overlay\">\n" << overlay_.str() << "</g>\n";
  // Legend to the right of the plot area.
  o << "<g class=\"legend\">\n";
  double y = top_ + 8;
  const double x = right() + 16;
  for (const LegendEntry& e : legend) {
    const std::string c = escape(e.colour);
    if (e.shape == "line") {
      o << "<line x1=\"" << fmt(x) << "\" x2=\"" << fmt(x + 18) << "\" y1=\"" << fmt(y) << "\" y2=\"" << fmt(y)
        << "\" stroke=\"" << c << "\" stroke-width=\"2\" stroke-dasharray=\"5 3\"/>";
    } else if (e.shape == "box" || e.shape == "band") {
      o << "<rect x=\"" << fmt(x + 2) << "\" y=\"" << fmt(y - 6) << "\" width=\"14\" height=\"12\" fill=\"" << c
        << "\"" << (e.shape == "band" ? " fill-opacity=\"0.25\"" : " stroke=\"#333\" stroke-width=\"0.5\"") << "/>";
    } else if (e.shape == "whisker") {
      o << "<line x1=\"" << fmt(x + 2) << "\" x2=\"" << fmt(x + 16) << "\" y1=\"" << fmt(y) << "\" y2=\"" << fmt(y)
        << "\" stroke=\"" << c << "\" stroke-width=\"2\"/><line x1=\"" << fmt(x + 2) << "\" x2=\"" << fmt(x + 2)
        << "\" y1=\"" << fmt(y - 4) << "\" y2=\"" << fmt(y + 4) << "\" stroke=\"" << c << "\" stroke-width=\"2\"/><line x1=\""
        << fmt(x + 16) << "\" x2=\"" << fmt(x + 16) << "\" y1=\"" << fmt(y - 4) << "\" y2=\"" << fmt(y + 4)
        << "\" stroke=\"" << c << "\" stroke-width=\"2\"/><circle cx=\"" << fmt(x + 9) << "\" cy=\"" << fmt(y)
        << "\" r=\"3\" fill=\"" << c << "\"/>";
    } else if (e.shape == "front") {
      o << "<line x1=\"" << fmt(x) << "\" x2=\"" << fmt(x + 18) << "\" y1=\"" << fmt(y) << "\" y2=\"" << fmt(y)
        << "\" stroke=\"" << c << "\" stroke-width=\"1.5\"/><circle cx=\"" << fmt(x + 9) << "\" cy=\"" << fmt(y)
        << "\" r=\"5\" fill=\"none\" stroke=\"" << c << "\" stroke-width=\"2\"/>";
    } else {
      o << "<circle cx=\"" << fmt(x + 9) << "\" cy=\"" << fmt(y) << "\" r=\"5\" fill=\"" << c << "\"/>";
    }
    o << "<text class=\"legend-text\" data-colour=\"" << c << "\" x=\"" << fmt(x + 26) << "\" y=\"" << fmt(y + 4) << "\">" << escape(e.text)
      << "</text>\n";
    y += 20;
  }
  o << "</g>\n</svg>\n";
  return o.str();
}

}  // namespace detail

}  // namespace tetra::report
