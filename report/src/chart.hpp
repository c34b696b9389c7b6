#pragma once
// An x/y chart drawn as inline SVG: frame, grid, ticks, axis labels, title and legend; the
// pages add their marks in data coordinates through px()/py().

#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace tetra::report::detail {

/// One axis: its label, its range (after padding) and whether it is logarithmic.
struct Axis {
  std::string label;
  double lo = 0;
  double hi = 1;
  bool log = false;
  std::vector<double> ticks;  ///< empty: chosen from the range
  bool show_ticks = true;     ///< false: no ticks, grid or tick labels (a row chart)
};

/// An axis over data values: padded by 5 % of the span (a factor on log axes), from zero when
/// `from_zero` (linear only), logarithmic when `log_if_ratio` > 0 and hi/lo exceeds it.
[[nodiscard]] Axis fit_axis(std::string label, const std::vector<double>& values, bool from_zero,
                            double log_if_ratio = 0);

/// Tick text: SI suffix (k, M, G, T) above 10^4, decimals from the tick spacing.
[[nodiscard]] std::string tick_label(double value, double spacing);

/// A legend entry: a swatch of `colour` ("line", "dot", "box", "band" or "whisker") and its
/// text (which carries the colour in data-colour, for tests).
struct LegendEntry {
  std::string text;
  std::string colour;
  std::string shape = "dot";
};

class Chart {
 public:
  /// `id` becomes the svg element's id; sizes in CSS pixels.
  Chart(std::string id, std::string title, Axis x, Axis y, double width = 760, double height = 440);

  /// Room left and right of the plot area (axis labels, legend), pixels; before drawing marks.
  void set_margins(double left, double right) noexcept {
    left_ = left;
    right_ = right;
  }

  [[nodiscard]] double px(double x) const;
  [[nodiscard]] double py(double y) const;
  [[nodiscard]] double left() const noexcept { return left_; }
  [[nodiscard]] double right() const noexcept { return width_ - right_; }
  [[nodiscard]] double top() const noexcept { return top_; }
  [[nodiscard]] double bottom() const noexcept { return height_ - bottom_; }

  /// Marks, in drawing order, clipped to the plot area.
  std::ostringstream& marks() { return marks_; }
  /// Text and lines over the plot area, not clipped.
  std::ostringstream& overlay() { return overlay_; }

  /// The whole svg element.
  [[nodiscard]] std::string svg(const std::vector<LegendEntry>& legend) const;

 private:
  std::string id_, title_;
  Axis x_, y_;
  double width_, height_;
  double left_ = 78, right_ = 190, top_ = 36, bottom_ = 52;
  std::ostringstream marks_, overlay_;
};

/// A colour-blind-safe palette (Okabe and Ito, "Color Universal Design", 2008; wine from Tol
/// in place of their yellow, which is faint on white), then greys.
[[nodiscard]] const std::string& palette(std::size_t i);

}  // namespace tetra::report::detail
