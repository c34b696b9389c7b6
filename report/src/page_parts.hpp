#pragma once
// What the three pages share: the document skeleton with its CSS, number formats, the
// summary table, reference lines and colour keys.

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "chart.hpp"
#include "tetra/report/report.hpp"

namespace tetra::report::detail {

/// ` data-v-key="value"` and ` data-ref="ref"`.
[[nodiscard]] std::string dv(const std::string& key, double value);
[[nodiscard]] std::string ref_attr(const std::string& ref);

[[nodiscard]] std::string fixed(double x, int digits);
/// Thousands separated by thin spaces: "12 345 678".
[[nodiscard]] std::string grouped(double x);
/// Three significant digits with k / M / G / T: "15.6 T", "38.1 M", "940".
[[nodiscard]] std::string si(double x);
/// Seconds as people read them: "16.1 s", "412 ms", "3.20 ms".
[[nodiscard]] std::string seconds(double s);
/// A value with its unit as Fact::unit describes.
[[nodiscard]] std::string with_unit(double v, const std::string& unit);

/// The document up to and including the h1 (and `subtitle` under it when not empty).
[[nodiscard]] std::string head(const std::string& title, const std::string& subtitle = "");
[[nodiscard]] std::string tail();
[[nodiscard]] std::string facts_table(const std::vector<Fact>& facts);

inline constexpr const char* kCapacity = "#B22222";  // limits: apart from the data colours
inline constexpr const char* kMargin = "#6A3D9A";

/// A dashed vertical reference line across the plot; its legend entry names it (points crowd
/// near such limits, so a label inside the plot would cover them).
void vline(Chart& c, double x, const std::string& colour);
/// A dashed horizontal reference line, labelled at its right end when `text` is not empty.
void hline(Chart& c, double y, const std::string& colour, const std::string& text);

/// Colour per name in first-appearance order.
class Colours {
 public:
  const std::string& of(const std::string& name);
  [[nodiscard]] const std::vector<std::string>& names() const { return order_; }

 private:
  std::map<std::string, std::size_t> index_;
  std::vector<std::string> order_;
};

}  // namespace tetra::report::detail
