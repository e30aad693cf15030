// engine/bench_svg.cpp — `specdec bench --plot FILE.svg`: a small SVG line-chart writer (two
// panels: the verify cost curves c(M), and the SIMULATION's speedup vs K for each alpha).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "specdec/bench.h"

namespace specdec {

namespace {

struct Series {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (n_points) (x, y)
  std::string color;
  std::string dash;  // "" solid, else a stroke-dasharray
};

struct Panel {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  double reference_y = 1.0;         // horizontal guide line
  std::string reference_label;
  std::string note;                 // shown when there is no series
};

std::string escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string tick_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", std::fabs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `n` ticks over `range`.
double nice_step(double range, int n) {
  const double raw = range / std::max(n, 1);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / power;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * power;
}

void text(std::string& svg, double x, double y, const std::string& s, const char* anchor = "middle", int size = 12,
          const char* extra = "") {
  svg += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + std::to_string(size) +
         "\" text-anchor=\"" + anchor + "\"" + extra + ">" + escape(s) + "</text>\n";
}

void line(std::string& svg, double x1, double y1, double x2, double y2, const std::string& color,
          const std::string& dash = "", double width = 1) {
  svg += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" + num(y2) +
         "\" stroke=\"" + color + "\" stroke-width=\"" + num(width) + "\"" +
         (dash.empty() ? "" : " stroke-dasharray=\"" + dash + "\"") + "/>\n";
}

// Draws one panel in the box (x0, y0, w, h).
void draw_panel(std::string& svg, const Panel& p, double x0, double y0, double w, double h) {
  const double left = x0 + 55, right = x0 + w - 10, top = y0 + 30, bottom = y0 + h - 45;
  text(svg, x0 + w / 2, y0 + 16, p.title, "middle", 14, " font-weight=\"bold\"");
  double x_min = 1e300, x_max = -1e300, y_max = p.reference_y;
  for (const Series& s : p.series)
    for (auto [x, y] : s.points) {
      x_min = std::min(x_min, x), x_max = std::max(x_max, x);
      if (std::isfinite(y)) y_max = std::max(y_max, y);
    }
  if (x_min > x_max) x_min = 0, x_max = 1;
  if (x_max == x_min) x_max = x_min + 1;
  const double y_min = 0;
  y_max *= 1.1 + 0.06 * static_cast<double>(p.series.size());  // headroom for the legend
  auto sx = [&](double x) { return left + (x - x_min) / (x_max - x_min) * (right - left); };
  auto sy = [&](double y) { return bottom - (y - y_min) / (y_max - y_min) * (bottom - top); };

  // Grid, ticks and axes.
  const double ystep = nice_step(y_max - y_min, 6);
  for (double y = 0; y <= y_max + 1e-9; y += ystep) {
    line(svg, left, sy(y), right, sy(y), "#e0e0e0");
    text(svg, left - 6, sy(y) + 4, tick_label(y), "end", 11);
  }
  const double xstep = std::max(1.0, nice_step(x_max - x_min, 8));
  for (double x = x_min; x <= x_max + 1e-9; x += xstep) {
    line(svg, sx(x), bottom, sx(x), bottom + 4, "#000000");
    text(svg, sx(x), bottom + 17, tick_label(x), "middle", 11);
  }
  line(svg, left, bottom, right, bottom, "#000000");
  line(svg, left, top, left, bottom, "#000000");
  text(svg, (left + right) / 2, y0 + h - 10, p.x_label, "middle", 12);
  const std::string cx = num(x0 + 14), cy = num((top + bottom) / 2);
  text(svg, x0 + 14, (top + bottom) / 2, p.y_label, "middle", 12,
       (" transform=\"rotate(-90 " + cx + " " + cy + ")\"").c_str());

  line(svg, left, sy(p.reference_y), right, sy(p.reference_y), "#888888", "2,3");
  if (!p.reference_label.empty()) text(svg, right - 4, sy(p.reference_y) - 4, p.reference_label, "end", 10);
  if (p.series.empty()) text(svg, (left + right) / 2, (top + bottom) / 2, p.note, "middle", 12);

  // Curves with point markers, then the legend (top left, on a translucent box).
  for (const Series& s : p.series) {
    std::string pts;
    for (auto [x, y] : s.points) pts += num(sx(x)) + "," + num(sy(y)) + " ";
    svg += "<polyline class=\"curve\" fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"2\"" +
           (s.dash.empty() ? "" : " stroke-dasharray=\"" + s.dash + "\"") + " points=\"" + pts + "\"/>\n";
    for (auto [x, y] : s.points)
      svg += "<circle cx=\"" + num(sx(x)) + "\" cy=\"" + num(sy(y)) + "\" r=\"2.5\" fill=\"" + s.color + "\"/>\n";
  }
  if (p.series.empty()) return;
  double legend_y = top + 8;
  svg += "<rect x=\"" + num(left + 4) + "\" y=\"" + num(top) + "\" width=\"250\" height=\"" +
         num(15.0 * static_cast<double>(p.series.size()) + 4) + "\" fill=\"#ffffff\" fill-opacity=\"0.85\"/>\n";
  for (const Series& s : p.series) {
    line(svg, left + 10, legend_y, left + 34, legend_y, s.color, s.dash, 2);
    text(svg, left + 40, legend_y + 4, s.label, "start", 11);
    legend_y += 15;
  }
}

const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};

}  // namespace

std::string bench_report_svg(const BenchReport& r) {
  Panel cost;
  cost.title = "Verify cost c(M) = t(M rows) / t(1 row)";
  cost.x_label = "rows per forward M";
  cost.y_label = "c(M)";
  cost.reference_label = "ideal: c(M) = 1";
  auto curve_series = [](const CostCurve& c, const std::string& color, const std::string& dash) {
    Series s{"context " + std::to_string(c.context), {}, color, dash};
    for (size_t i = 0; i < c.cost.size(); ++i) s.points.emplace_back(static_cast<double>(i + 1), c.cost[i]);
    return s;
  };
  if (!r.short_curve.empty()) cost.series.push_back(curve_series(r.short_curve, kColors[0], ""));
  if (!r.long_curve.empty()) cost.series.push_back(curve_series(r.long_curve, kColors[1], "6,4"));

  Panel speed;
  speed.title = "SIMULATION: speedup vs draft length K";
  speed.x_label = "draft tokens per step K";
  speed.y_label = "predicted speedup over plain decoding";
  speed.reference_label = "plain decoding";
  speed.note = "no --simulate-alpha given";
  for (size_t i = 0; i < r.simulations.size(); ++i) {
    const Simulation& sim = r.simulations[i];
    const std::string color = kColors[i % (sizeof kColors / sizeof kColors[0])];
    char label[96];
    std::snprintf(label, sizeof label, "alpha %.2f, c_draft %.3f, ctx %d", sim.alpha, sim.c_draft,
                  r.short_curve.context);
    Series s{label, {}, color, ""};
    Series l{"", {}, color, "6,4"};
    Series loop{"", {}, color, "1,3"};
    for (const SimulatedPoint& p : sim.points) {
      s.points.emplace_back(p.k, p.speedup_short);
      if (p.speedup_long > 0) l.points.emplace_back(p.k, p.speedup_long);
      if (p.loop_speedup > 0) loop.points.emplace_back(p.k, p.loop_speedup);
    }
    speed.series.push_back(std::move(s));
    if (!l.points.empty()) {
      std::snprintf(label, sizeof label, "alpha %.2f, ctx %d", sim.alpha, r.long_curve.context);
      l.label = label;
      speed.series.push_back(std::move(l));
    }
    if (!loop.points.empty()) {
      std::snprintf(label, sizeof label, "alpha %.2f, forced-acceptance loop", sim.alpha);
      loop.label = label;
      speed.series.push_back(std::move(loop));
    }
  }

  const double width = 1000, height = 440, panel_w = 490, panel_h = 400;
  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  svg += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(width) + "\" height=\"" + num(height) +
         "\" viewBox=\"0 0 " + num(width) + " " + num(height) + "\" font-family=\"sans-serif\">\n";
  svg += "<rect x=\"0\" y=\"0\" width=\"" + num(width) + "\" height=\"" + num(height) + "\" fill=\"#ffffff\"/>\n";
  char caption[512];
  std::snprintf(caption, sizeof caption, "specdec bench: %s, ISA %s, %d threads, %s", r.model_path.c_str(),
                r.isa.c_str(), r.n_threads, r.date.c_str());
  text(svg, width / 2, height - 8, caption, "middle", 11, " fill=\"#555555\"");
  draw_panel(svg, cost, 5, 5, panel_w, panel_h);
  draw_panel(svg, speed, 5 + panel_w + 5, 5, panel_w, panel_h);
  svg += "</svg>\n";
  return svg;
}

}  // namespace specdec
