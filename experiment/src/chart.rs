//! Dependency-free SVG charts: [`BarChart`] (grouped bars) and [`Distribution`] (one box
//! plot per group, with the points drawn over it).
//!
//! Both render to a self-contained SVG string with the Okabe–Ito palette ([`PALETTE`]),
//! which stays distinguishable under the common forms of colour blindness. Every text is
//! XML-escaped, and no input panics: empty data draws a frame saying "no data", and a
//! value that is not finite draws no bar and the label "n/a".
//!
//! ```
//! use stencil_experiment::chart::BarChart;
//! let chart = BarChart {
//!     title: "rep-4 per preset".into(),
//!     y_label: "rep-4 (%)".into(),
//!     categories: vec!["greedy".into(), "nucleus".into()],
//!     series: vec![("SmolLM2".into(), vec![12.5, 1.25])],
//!     y_max: None,
//! };
//! let svg = chart.to_svg();
//! assert!(svg.starts_with("<svg") && svg.contains("rep-4 per preset") && svg.contains(">12.5<"));
//! ```

use std::fmt::Write;

/// The Okabe–Ito colour-blind-safe palette, in the order series get their colours.
pub const PALETTE: [&str; 8] = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"];

const WIDTH: f64 = 720.0;
const TOP: f64 = 48.0;

/// A grouped vertical bar chart: one group of bars per category, one bar per series.
///
/// ```
/// use stencil_experiment::chart::BarChart;
/// let chart = BarChart {
///     title: "valid <rate>".into(),
///     y_label: "%".into(),
///     categories: vec!["greedy".into()],
///     series: vec![("a".into(), vec![f64::NAN]), ("b".into(), vec![])],
///     y_max: Some(100.0),
/// };
/// let svg = chart.to_svg();
/// assert!(svg.contains("valid &lt;rate&gt;") && svg.contains("n/a") && !svg.contains("NaN"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct BarChart {
    /// The title above the chart.
    pub title: String,
    /// The y axis's label.
    pub y_label: String,
    /// The x groups (e.g. presets).
    pub categories: Vec<String>,
    /// Named series, one value per category (a missing value reads as "n/a").
    pub series: Vec<(String, Vec<f64>)>,
    /// The least top of the y axis (e.g. 100 for percentages); `None`: fit the data.
    pub y_max: Option<f64>,
}

impl BarChart {
    /// The chart as an SVG document.
    pub fn to_svg(&self) -> String {
        let (left, right, plot_h) = (64.0, WIDTH - 16.0, 260.0);
        let names: Vec<&str> = self.series.iter().map(|(n, _)| n.as_str()).collect();
        let (legend, legend_h) = legend(&names, left, TOP + plot_h + 40.0, right);
        let mut svg = open(TOP + plot_h + 48.0 + legend_h, &self.title);
        if self.categories.is_empty() || self.series.is_empty() {
            return no_data(svg, TOP + plot_h / 2.0);
        }
        let value = |s: usize, c: usize| self.series[s].1.get(c).copied().filter(|v| v.is_finite());
        let finite = (0..self.series.len()).flat_map(|s| (0..self.categories.len()).filter_map(move |c| value(s, c)));
        let (lo, hi) = finite
            .fold((0.0f64, self.y_max.filter(|m| m.is_finite()).unwrap_or(0.0)), |(lo, hi), v| (lo.min(v), hi.max(v)));
        let (lo, hi, step) = ticks(lo, hi);
        let y = |v: f64| TOP + plot_h - (v - lo) / (hi - lo) * plot_h;
        for t in tick_values(lo, hi, step) {
            svg += &line((left, y(t)), (right, y(t)), "#ddd");
            svg += &text(left - 6.0, y(t) + 4.0, r#"text-anchor="end""#, &label(t));
        }
        let mid = TOP + plot_h / 2.0;
        let y_label = esc(&self.y_label);
        let _ =
            write!(svg, r#"<text transform="translate(16 {mid}) rotate(-90)" text-anchor="middle">{y_label}</text>"#);
        let gw = (right - left) / self.categories.len() as f64;
        let bw = gw * 0.8 / self.series.len() as f64;
        for (c, category) in self.categories.iter().enumerate() {
            let name = esc(&truncate(category, (gw / 7.0) as usize));
            svg += &text(left + gw * (c as f64 + 0.5), TOP + plot_h + 18.0, MIDDLE, &name);
            for (s, (series, _)) in self.series.iter().enumerate() {
                let x = left + gw * (c as f64 + 0.1) + bw * s as f64;
                let tip = esc(&format!("{series}, {category}: {}", label(value(s, c).unwrap_or(f64::NAN))));
                svg += &bar(value(s, c), (x, bw), y(0.0), y, PALETTE[s % PALETTE.len()], &tip);
            }
        }
        svg += &line((left, y(0.0)), (right, y(0.0)), "#333");
        close(svg + &legend)
    }
}

const MIDDLE: &str = r#"text-anchor="middle""#;

/// One bar (`x`, width) with its value label and tooltip; `None` draws only "n/a" on the
/// baseline `y0`.
fn bar(v: Option<f64>, (x, w): (f64, f64), y0: f64, y: impl Fn(f64) -> f64, colour: &str, tip: &str) -> String {
    let value = |ty: f64, t: &str| text(x + w / 2.0, ty, r#"text-anchor="middle" font-size="10""#, t);
    let Some(v) = v else {
        return format!("<g><title>{tip}</title>{}</g>", value(y0 - 4.0, "n/a"));
    };
    let (top, h, bw) = (y(v).min(y0), (y(v) - y0).abs(), (w - 2.0).max(1.0));
    let rect = format!(r#"<rect x="{x:.1}" y="{top:.1}" width="{bw:.1}" height="{h:.1}" fill="{colour}"/>"#);
    let ty = if v < 0.0 { y(v) + 12.0 } else { y(v) - 4.0 };
    format!("<g><title>{tip}</title>{rect}{}</g>", value(ty, &label(v)))
}

/// Distributions side by side: per group a horizontal box plot (min, quartiles, median,
/// max) with every point drawn over it, jittered deterministically.
///
/// ```
/// use stencil_experiment::chart::Distribution;
/// let chart = Distribution {
///     title: "Length per preset".into(),
///     x_label: "tokens".into(),
///     groups: vec![("greedy".into(), vec![40.0, 40.0]), ("nucleus".into(), vec![12.0, 55.0, 31.0])],
/// };
/// let svg = chart.to_svg();
/// assert!(svg.starts_with("<svg") && svg.ends_with("</svg>") && svg.contains("median 31"));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Distribution {
    /// The title above the chart.
    pub title: String,
    /// The x axis's label (the measured quantity).
    pub x_label: String,
    /// Named groups of values (non-finite values are left out).
    pub groups: Vec<(String, Vec<f64>)>,
}

impl Distribution {
    /// The chart as an SVG document.
    pub fn to_svg(&self) -> String {
        let chars = self.groups.iter().map(|(n, _)| n.chars().count()).max().unwrap_or(0);
        let (left, right, row) = ((12.0 + 7.0 * chars as f64).clamp(80.0, 220.0), WIDTH - 150.0, 36.0);
        let plot_h = row * self.groups.len().max(1) as f64;
        let mut svg = open(TOP + plot_h + 50.0, &self.title);
        let data: Vec<Vec<f64>> = self.groups.iter().map(|(_, v)| finite_sorted(v)).collect();
        let all = data.iter().flatten();
        let (lo, hi) = all.fold((0.0f64, 0.0f64), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        if data.iter().all(Vec::is_empty) {
            return no_data(svg, TOP + plot_h / 2.0);
        }
        let (lo, hi, step) = ticks(lo, hi);
        let x = |v: f64| left + (v - lo) / (hi - lo) * (right - left);
        let bottom = TOP + plot_h;
        for t in tick_values(lo, hi, step) {
            svg += &line((x(t), TOP), (x(t), bottom), "#ddd");
            svg += &text(x(t), bottom + 16.0, MIDDLE, &label(t));
        }
        svg += &text((left + right) / 2.0, bottom + 36.0, MIDDLE, &esc(&self.x_label));
        for (i, ((name, _), values)) in self.groups.iter().zip(&data).enumerate() {
            let cy = TOP + row * (i as f64 + 0.5);
            svg += &text(left - 8.0, cy + 4.0, r#"text-anchor="end""#, &esc(&truncate(name, 30)));
            svg += &boxplot(values, cy, &x, PALETTE[i % PALETTE.len()], right + 8.0);
        }
        close(svg)
    }
}

/// One row: whisker, box, median, jittered points and a "median · n" note at `note_x`.
fn boxplot(v: &[f64], cy: f64, x: &impl Fn(f64) -> f64, colour: &str, note_x: f64) -> String {
    let note = |t: &str| text(note_x, cy + 4.0, "", t);
    if v.is_empty() {
        return format!("<g>{}</g>", note("n/a"));
    }
    let [lo, q1, med, q3, hi] = [0.0, 0.25, 0.5, 0.75, 1.0].map(|p| x(quantile(v, p)));
    let (top, bottom, width) = (cy - 10.0, cy + 10.0, q3 - q1);
    let mut g = format!(
        r#"<g><line x1="{lo:.1}" x2="{hi:.1}" y1="{cy:.1}" y2="{cy:.1}" stroke="{colour}"/><rect x="{q1:.1}" y="{top:.1}" width="{width:.1}" height="20" fill="{colour}" fill-opacity="0.2" stroke="{colour}"/><line x1="{med:.1}" x2="{med:.1}" y1="{top:.1}" y2="{bottom:.1}" stroke="{colour}" stroke-width="3"/>"#
    );
    for (i, &p) in v.iter().enumerate() {
        let jitter = ((i as f64 * 0.618_034).fract() - 0.5) * 16.0;
        let (px, py) = (x(p), cy + jitter);
        let _ = write!(g, r#"<circle cx="{px:.1}" cy="{py:.1}" r="2.5" fill="{colour}" fill-opacity="0.7"/>"#);
    }
    g + &note(&format!("median {} · n={}", label(quantile(v, 0.5)), v.len())) + "</g>"
}

/// The finite values of `v`, sorted.
fn finite_sorted(v: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = v.iter().copied().filter(|v| v.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// The `p` quantile of sorted, non-empty `v`, interpolated linearly between ranks.
fn quantile(v: &[f64], p: f64) -> f64 {
    let rank = p * (v.len() - 1) as f64;
    let (i, frac) = (rank.floor() as usize, rank.fract());
    v[i] + (v[(i + 1).min(v.len() - 1)] - v[i]) * frac
}

/// A round axis covering `lo..=hi` in about four steps: `(lo, hi, step)`, with `lo < hi`.
fn ticks(lo: f64, hi: f64) -> (f64, f64, f64) {
    let (lo, hi) = (lo.max(-1e15), hi.min(1e15));
    let span = if hi - lo > 1e-9 { hi - lo } else { 1.0 };
    let raw = span / 4.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let (lo, hi) = ((lo / step).floor() * step, (hi / step).ceil() * step);
    (lo, if hi > lo { hi } else { lo + step }, step)
}

fn tick_values(lo: f64, hi: f64, step: f64) -> impl Iterator<Item = f64> {
    let n = ((hi - lo) / step).round() as usize;
    (0..=n.min(20)).map(move |i| lo + step * i as f64)
}

/// A value as labels show it: at most two decimals, trailing zeros dropped; "n/a" when
/// not finite.
pub(crate) fn label(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    let s = format!("{v:.2}");
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { &s };
    if s == "-0" { "0" } else { s }.into()
}

/// The legend's SVG, flowing in rows from (`x0`, `y0`) to `right`, and its height.
fn legend(names: &[&str], x0: f64, y0: f64, right: f64) -> (String, f64) {
    let (mut svg, mut x, mut y) = (String::from("<g>"), x0, y0);
    for (i, name) in names.iter().enumerate() {
        let name = truncate(name, 60);
        let w = 34.0 + 7.0 * name.chars().count() as f64;
        if x > x0 && x + w > right {
            (x, y) = (x0, y + 18.0);
        }
        let (top, colour) = (y - 10.0, PALETTE[i % PALETTE.len()]);
        let _ = write!(svg, r#"<rect x="{x:.1}" y="{top:.1}" width="12" height="12" fill="{colour}"/>"#);
        svg += &text(x + 18.0, y, "", &esc(&name));
        x += w;
    }
    (svg + "</g>", if names.is_empty() { 0.0 } else { y - y0 + 18.0 })
}

fn open(height: f64, title: &str) -> String {
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="sans-serif" font-size="12"><rect width="100%" height="100%" fill="#fff"/><text x="{}" y="26" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"##,
        WIDTH / 2.0,
        esc(title)
    )
}

fn no_data(svg: String, y: f64) -> String {
    close(svg + &text(WIDTH / 2.0, y, r##"text-anchor="middle" fill="#666""##, "no data"))
}

/// A text element; `content` is already escaped.
fn text(x: f64, y: f64, attributes: &str, content: &str) -> String {
    format!(r#"<text x="{x:.1}" y="{y:.1}" {attributes}>{content}</text>"#)
}

fn line((x1, y1): (f64, f64), (x2, y2): (f64, f64), colour: &str) -> String {
    format!(r#"<line x1="{x1:.1}" x2="{x2:.1}" y1="{y1:.1}" y2="{y2:.1}" stroke="{colour}"/>"#)
}

fn close(svg: String) -> String {
    svg + "</svg>"
}

/// `s` cut to `max` characters, with "…" when cut.
fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max.max(1) {
        return s.into();
    }
    s.chars().take(max.max(2) - 1).collect::<String>() + "…"
}

/// `s` escaped for XML text and attributes, without the control characters XML forbids.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if c.is_control() && !matches!(c, '\t' | '\n' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}
