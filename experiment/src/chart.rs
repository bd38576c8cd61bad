//! Dependency-free SVG charts: a [`Figure`] is a grid of panels — [`Lines`] (a metric
//! against a swept parameter, one line per series with its interval band) or [`Scatter`]
//! (one point per setting on a plane, with each series' Pareto frontier) — under one
//! legend.
//!
//! Colours come from the Okabe–Ito palette ([`PALETTE`]), distinguishable under the common
//! forms of colour blindness; a series has the same colour in every panel. Every text is
//! XML-escaped, and no input panics: a panel without finite data says "no data", and a
//! missing or non-finite value leaves a gap.
//!
//! What a reader or a test can rely on: the legend is `<g class="legend">`, one
//! `<g class="key" data-series="NAME">` per series drawn in some panel (a series without
//! data is left out); each panel draws a series as
//! `<g class="series" data-series="NAME">` holding a `<circle>` per point (and its line,
//! band or frontier as `<path>`s).
//!
//! ```
//! use stencil_experiment::chart::{Figure, Lines, Panel};
//! use stencil_experiment::stats::Estimate;
//! let e = |v: f64| Some(Estimate { value: v, lo: v - 0.1, hi: v + 0.1 });
//! let figure = Figure {
//!     title: "Temperature".into(),
//!     legend: vec!["SmolLM2".into(), "Gemma".into()],
//!     columns: 1,
//!     panels: vec![Panel::Lines(Lines {
//!         title: "story".into(),
//!         y_label: "diversity".into(),
//!         x_label: "temperature".into(),
//!         x: vec!["0".into(), "1".into()],
//!         series: vec![(0, vec![e(0.2), e(0.9)]), (1, vec![e(0.1), None])],
//!         log_y: false,
//!     })],
//! };
//! let svg = figure.to_svg();
//! assert!(svg.starts_with("<svg") && svg.contains(r#"data-series="Gemma""#));
//! ```

use std::fmt::Write;

use crate::stats::Estimate;

/// The Okabe–Ito colour-blind-safe palette, in the order series get their colours.
pub const PALETTE: [&str; 8] = ["#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#000000", "#F0E442"];

/// Panels in a grid under a title and a legend.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// The title above the grid.
    pub title: String,
    /// The series' names; series `i` is drawn in `PALETTE[i]` in every panel.
    pub legend: Vec<String>,
    /// Panels per row (at least 1).
    pub columns: usize,
    /// The panels, row by row.
    pub panels: Vec<Panel>,
}

/// One panel of a [`Figure`].
#[derive(Clone, Debug, PartialEq)]
pub enum Panel {
    /// Lines over categories.
    Lines(Lines),
    /// Points on a plane.
    Scatter(Scatter),
}

/// A metric against the values of a parameter (evenly spaced categories): per series a
/// line through the values and a band through the intervals.
#[derive(Clone, Debug, PartialEq)]
pub struct Lines {
    /// The panel's title.
    pub title: String,
    /// The y axis's label.
    pub y_label: String,
    /// The x axis's label.
    pub x_label: String,
    /// The x categories, left to right.
    pub x: Vec<String>,
    /// Per series: its index in the legend and its estimate per category (`None`: a gap).
    pub series: Vec<(usize, Vec<Option<Estimate>>)>,
    /// A logarithmic y axis (non-positive values are left out).
    pub log_y: bool,
}

/// A point on a [`Scatter`]: x, y and its label.
pub type Dot = (f64, f64, String);

/// Points on a plane, one per setting, with each series' Pareto frontier drawn through the
/// points no other point of the series beats on both axes, and those points labelled.
#[derive(Clone, Debug, PartialEq)]
pub struct Scatter {
    /// The panel's title.
    pub title: String,
    /// The x axis's label.
    pub x_label: String,
    /// The y axis's label.
    pub y_label: String,
    /// Per series: its index in the legend and its points `(x, y, label)`.
    pub series: Vec<(usize, Vec<Dot>)>,
    /// A logarithmic y axis (non-positive values are left out).
    pub log_y: bool,
    /// Whether more is better on x and on y (for the frontier).
    pub better: (bool, bool),
}

const PANEL_W: f64 = 330.0;
const PANEL_H: f64 = 250.0;
/// Plot area inside a panel: left, top, right, bottom margins.
const MARGIN: (f64, f64, f64, f64) = (58.0, 28.0, 14.0, 46.0);

impl Figure {
    /// The figure as an SVG document.
    pub fn to_svg(&self) -> String {
        let columns = self.columns.max(1);
        let rows = self.panels.len().div_ceil(columns).max(1);
        let width = (PANEL_W * columns as f64).max(480.0);
        let top = 40.0;
        let drawn: Vec<bool> = (0..self.legend.len()).map(|i| self.panels.iter().any(|p| p.draws(i))).collect();
        let (legend, legend_h) = legend(&self.legend, &drawn, 16.0, top + PANEL_H * rows as f64 + 20.0, width - 16.0);
        let height = top + PANEL_H * rows as f64 + legend_h + 24.0;
        let mut svg = format!(
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="#fff"/>"##
        );
        svg += &text(width / 2.0, 24.0, r#"text-anchor="middle" font-size="15" font-weight="bold""#, &esc(&self.title));
        for (i, panel) in self.panels.iter().enumerate() {
            let origin = (PANEL_W * (i % columns) as f64, top + PANEL_H * (i / columns) as f64);
            svg += &match panel {
                Panel::Lines(p) => p.draw(origin, &self.legend),
                Panel::Scatter(p) => p.draw(origin, &self.legend),
            };
        }
        svg + &legend + "</svg>"
    }
}

impl Panel {
    /// Whether the panel draws a point of series `i`.
    fn draws(&self, i: usize) -> bool {
        match self {
            Panel::Lines(p) => p
                .series
                .iter()
                .any(|(s, v)| *s == i && v.iter().flatten().any(|e| transform(e.value, p.log_y).is_some())),
            Panel::Scatter(p) => p
                .series
                .iter()
                .any(|(s, v)| *s == i && v.iter().any(|(x, y, _)| x.is_finite() && transform(*y, p.log_y).is_some())),
        }
    }
}

/// A panel's plot area and its y mapping.
struct Frame {
    left: f64,
    top: f64,
    right: f64,
    bottom: f64,
}

impl Frame {
    fn at((x, y): (f64, f64)) -> Frame {
        Frame { left: x + MARGIN.0, top: y + MARGIN.1, right: x + PANEL_W - MARGIN.2, bottom: y + PANEL_H - MARGIN.3 }
    }

    /// The title, the frame, the y ticks and labels of an axis over `lo..hi` (already
    /// transformed when `log`), and the axis labels.
    fn axes(&self, title: &str, (lo, hi): (f64, f64), log: bool, x_label: &str, y_label: &str) -> String {
        let mut svg = text(
            (self.left + self.right) / 2.0,
            self.top - 10.0,
            r#"text-anchor="middle" font-weight="bold""#,
            &esc(title),
        );
        for (t, name) in axis_ticks(lo, hi, log) {
            let y = self.y(t, lo, hi);
            svg += &line((self.left, y), (self.right, y), "#e4e4e4");
            svg += &text(self.left - 4.0, y + 4.0, r#"text-anchor="end""#, &name);
        }
        let _ = write!(
            svg,
            r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="#999"/>"##,
            self.left,
            self.top,
            self.right - self.left,
            self.bottom - self.top
        );
        svg += &text((self.left + self.right) / 2.0, self.bottom + 34.0, MIDDLE, &esc(x_label));
        let mid = (self.top + self.bottom) / 2.0;
        let x = self.left - 44.0;
        let _ = write!(
            svg,
            r#"<text transform="translate({x:.1} {mid:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            esc(y_label)
        );
        svg
    }

    fn y(&self, v: f64, lo: f64, hi: f64) -> f64 {
        self.bottom - (v - lo) / (hi - lo) * (self.bottom - self.top)
    }

    fn x(&self, v: f64, lo: f64, hi: f64) -> f64 {
        self.left + (v - lo) / (hi - lo) * (self.right - self.left)
    }

    fn no_data(&self) -> String {
        text(
            (self.left + self.right) / 2.0,
            (self.top + self.bottom) / 2.0,
            r##"text-anchor="middle" fill="#666""##,
            "no data",
        )
    }
}

impl Lines {
    fn draw(&self, origin: (f64, f64), legend: &[String]) -> String {
        let frame = Frame::at(origin);
        let tf = |v: f64| transform(v, self.log_y);
        let all = self.series.iter().flat_map(|(_, v)| v.iter().flatten()).flat_map(|e| [e.lo, e.value, e.hi]);
        let Some(range) = range(all.filter_map(tf)) else {
            return frame.axes(&self.title, (0.0, 1.0), false, &self.x_label, &self.y_label) + &frame.no_data();
        };
        let (lo, hi) = padded(range, self.log_y);
        let mut svg = frame.axes(&self.title, (lo, hi), self.log_y, &self.x_label, &self.y_label);
        let n = self.x.len().max(1);
        let step = (frame.right - frame.left) / n as f64;
        let cx = |i: usize| frame.left + step * (i as f64 + 0.5);
        let every = (self.x.len() / 8).max(1);
        for (i, name) in self.x.iter().enumerate().filter(|(i, _)| i % every == 0) {
            svg +=
                &text(cx(i), frame.bottom + 14.0, MIDDLE, &esc(&truncate(name, (step * every as f64 / 6.0) as usize)));
        }
        for (s, values) in &self.series {
            let (name, colour) = series_style(legend, *s);
            let point = |i: usize| -> Option<(f64, f64, f64, f64)> {
                let e = values.get(i).copied().flatten()?;
                let v = tf(e.value)?;
                let (l, h) = (tf(e.lo).unwrap_or(lo), tf(e.hi).unwrap_or(v));
                Some((cx(i), frame.y(v, lo, hi), frame.y(l.min(v), lo, hi), frame.y(h.max(v), lo, hi)))
            };
            let mut g = format!(r#"<g class="series" data-series="{}">"#, esc(name));
            for run in runs((0..values.len()).map(point)) {
                let upper: Vec<String> = run.iter().map(|p| format!("{:.1} {:.1}", p.0, p.3)).collect();
                let lower: Vec<String> = run.iter().rev().map(|p| format!("{:.1} {:.1}", p.0, p.2)).collect();
                let _ = write!(
                    g,
                    r#"<path class="band" d="M{}L{}Z" fill="{colour}" fill-opacity="0.15" stroke="none"/>"#,
                    upper.join("L"),
                    lower.join("L")
                );
                let mid: Vec<String> = run.iter().map(|p| format!("{:.1} {:.1}", p.0, p.1)).collect();
                let _ = write!(
                    g,
                    r#"<path class="line" d="M{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
                    mid.join("L")
                );
            }
            for (i, p) in (0..values.len()).filter_map(|i| point(i).map(|p| (i, p))) {
                let e = values[i].expect("drawn points have values");
                let tip = format!(
                    "{name}, {}: {} ({}–{})",
                    self.x.get(i).map_or("", String::as_str),
                    label(e.value),
                    label(e.lo),
                    label(e.hi)
                );
                let _ = write!(
                    g,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"><title>{}</title></circle>"#,
                    p.0,
                    p.1,
                    esc(&tip)
                );
            }
            svg += &(g + "</g>");
        }
        svg
    }
}

impl Scatter {
    fn draw(&self, origin: (f64, f64), legend: &[String]) -> String {
        let frame = Frame::at(origin);
        let tf = |v: f64| transform(v, self.log_y);
        let finite = |p: &&Dot| p.0.is_finite() && tf(p.1).is_some();
        let points = || self.series.iter().flat_map(|(_, v)| v.iter().filter(finite));
        let (Some(xr), Some(yr)) = (range(points().map(|p| p.0)), range(points().filter_map(|p| tf(p.1)))) else {
            return frame.axes(&self.title, (0.0, 1.0), false, &self.x_label, &self.y_label) + &frame.no_data();
        };
        let ((xlo, xhi), (ylo, yhi)) = (padded(xr, false), padded(yr, self.log_y));
        let mut svg = frame.axes(&self.title, (ylo, yhi), self.log_y, &self.x_label, &self.y_label);
        for (t, name) in axis_ticks(xlo, xhi, false) {
            svg += &text(frame.x(t, xlo, xhi), frame.bottom + 14.0, MIDDLE, &name);
        }
        let at = |x: f64, y: f64| (frame.x(x, xlo, xhi), frame.y(tf(y).unwrap_or(ylo), ylo, yhi));
        for (s, values) in &self.series {
            let (name, colour) = series_style(legend, *s);
            let values: Vec<&Dot> = values.iter().filter(finite).collect();
            let mut g = format!(r#"<g class="series" data-series="{}">"#, esc(name));
            let front = frontier(&values, self.better);
            if front.len() > 1 {
                let d: Vec<String> = front
                    .iter()
                    .map(|&i| at(values[i].0, values[i].1))
                    .map(|(x, y)| format!("{x:.1} {y:.1}"))
                    .collect();
                let _ = write!(
                    g,
                    r#"<path class="frontier" d="M{}" fill="none" stroke="{colour}" stroke-width="1.5" stroke-dasharray="4 3"/>"#,
                    d.join("L")
                );
            }
            for (i, (x, y, name)) in values.iter().enumerate() {
                let (px, py) = at(*x, *y);
                let on = front.contains(&i);
                let tip = format!("{name}: {}, {}", label(*x), label(*y));
                let (r, opacity) = if on { (3.5, 1.0) } else { (2.5, 0.45) };
                let _ = write!(
                    g,
                    r#"<circle cx="{px:.1}" cy="{py:.1}" r="{r}" fill="{colour}" fill-opacity="{opacity}"><title>{}</title></circle>"#,
                    esc(&tip)
                );
                if on {
                    // Near the right edge the label goes to the left of its point.
                    let (lx, anchor) = if px > frame.right - 50.0 { (px - 5.0, "end") } else { (px + 5.0, "start") };
                    let attributes = format!(r#"font-size="9" fill="{colour}" text-anchor="{anchor}""#);
                    g += &text(lx, py - 4.0, &attributes, &esc(&truncate(name, 18)));
                }
            }
            svg += &(g + "</g>");
        }
        svg
    }
}

/// The indices of the points no other point beats on both axes (`better`: more is better
/// on x, on y), ordered by x.
///
/// ```
/// use stencil_experiment::chart::frontier;
/// let p = |x: f64, y: f64| (x, y, String::new());
/// let points = [p(0.1, 0.9), p(0.5, 0.5), p(0.4, 0.4), p(0.9, 0.1)];
/// let refs: Vec<_> = points.iter().collect();
/// assert_eq!(frontier(&refs, (true, true)), [0, 1, 3]); // (0.4, 0.4) is beaten by (0.5, 0.5)
/// ```
pub fn frontier(points: &[&Dot], better: (bool, bool)) -> Vec<usize> {
    let key = |p: &Dot| (if better.0 { p.0 } else { -p.0 }, if better.1 { p.1 } else { -p.1 });
    let beats = |a: (f64, f64), b: (f64, f64)| a.0 >= b.0 && a.1 >= b.1 && (a.0 > b.0 || a.1 > b.1);
    let mut front: Vec<usize> =
        (0..points.len()).filter(|&i| !points.iter().any(|q| beats(key(q), key(points[i])))).collect();
    front.sort_by(|&a, &b| points[a].0.total_cmp(&points[b].0).then(a.cmp(&b)));
    front.dedup_by(|a, b| points[*a].0 == points[*b].0 && points[*a].1 == points[*b].1);
    front
}

/// Runs of consecutive `Some`s.
fn runs<T>(items: impl Iterator<Item = Option<T>>) -> Vec<Vec<T>> {
    let mut out: Vec<Vec<T>> = vec![Vec::new()];
    for item in items {
        match item {
            Some(v) => out.last_mut().expect("never empty").push(v),
            None if out.last().is_some_and(|r| !r.is_empty()) => out.push(Vec::new()),
            None => {}
        }
    }
    out.retain(|r| !r.is_empty());
    out
}

fn series_style(legend: &[String], i: usize) -> (&str, &'static str) {
    (legend.get(i).map_or("?", String::as_str), PALETTE[i % PALETTE.len()])
}

/// `v` on the axis: `log10` on a log axis (`None` unless positive), `None` unless finite.
fn transform(v: f64, log: bool) -> Option<f64> {
    match (v.is_finite(), log) {
        (false, _) => None,
        (true, true) if v > 0.0 => Some(v.log10()),
        (true, true) => None,
        (true, false) => Some(v),
    }
}

fn range(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values
        .filter(|v| v.is_finite())
        .fold(None, |r, v| Some(r.map_or((v, v), |(lo, hi): (f64, f64)| (lo.min(v), hi.max(v)))))
}

/// `range` widened by 5 % on each side (and to a unit when it is a point), clamped to
/// ±1e15.
fn padded((lo, hi): (f64, f64), log: bool) -> (f64, f64) {
    let (lo, hi) = (lo.max(-1e15), hi.min(1e15));
    let span = hi - lo;
    if span <= 1e-12 {
        let pad = if log { 0.5 } else { lo.abs().max(1.0) * 0.1 };
        return (lo - pad, hi + pad);
    }
    (lo - span * 0.05, hi + span * 0.05)
}

/// Tick positions in `lo..=hi` (axis units) and their labels: round steps; on a log axis
/// 1, 2, 5 × 10ᵏ (or 10ᵏ alone when that is enough).
fn axis_ticks(lo: f64, hi: f64, log: bool) -> Vec<(f64, String)> {
    if log {
        for mantissas in [&[1.0][..], &[1.0, 2.0, 5.0][..]] {
            let ticks: Vec<(f64, String)> = ((lo.floor() as i32 - 1)..=(hi.ceil() as i32))
                .flat_map(|k| mantissas.iter().map(move |m| m * 10f64.powi(k)))
                .map(|v| (v.log10(), label(v)))
                .filter(|(t, _)| *t >= lo && *t <= hi)
                .collect();
            if ticks.len() >= 3 {
                return ticks;
            }
        }
        return linear_ticks(lo, hi).into_iter().map(|t| (t, label(10f64.powf(t)))).collect();
    }
    linear_ticks(lo, hi).into_iter().map(|t| (t, label(t))).collect()
}

/// Round values in `lo..=hi`, about four steps apart.
fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = if hi - lo > 1e-12 { hi - lo } else { 1.0 };
    let raw = span / 4.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    (0..=12).map(|i| (first + i) as f64 * step).take_while(|t| *t <= hi + 1e-12).collect()
}

/// A value as labels show it: at most two decimals (three significant digits below 0.1),
/// trailing zeros dropped; "n/a" when not finite.
///
/// ```
/// use stencil_experiment::chart::label;
/// assert_eq!((label(0.5), label(12.345), label(0.0123), label(f64::NAN)), ("0.5".into(), "12.35".into(), "0.0123".into(), "n/a".into()));
/// ```
pub fn label(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    let s = if v != 0.0 && v.abs() < 0.1 { format!("{v:.4}") } else { format!("{v:.2}") };
    let s = if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.') } else { &s };
    if s == "-0" { "0" } else { s }.into()
}

/// The legend's SVG — the series `drawn` somewhere, in their colours — flowing in rows from
/// (`x0`, `y0`) to `right`, and its height.
fn legend(names: &[String], drawn: &[bool], x0: f64, y0: f64, right: f64) -> (String, f64) {
    let (mut svg, mut x, mut y) = (String::from(r#"<g class="legend">"#), x0, y0);
    for (i, name) in names.iter().enumerate().filter(|(i, _)| drawn[*i]) {
        let shown = truncate(name, 60);
        let w = 34.0 + 7.0 * shown.chars().count() as f64;
        if x > x0 && x + w > right {
            (x, y) = (x0, y + 18.0);
        }
        let (top, colour) = (y - 10.0, PALETTE[i % PALETTE.len()]);
        let _ = write!(
            svg,
            r#"<g class="key" data-series="{}"><rect x="{x:.1}" y="{top:.1}" width="12" height="12" fill="{colour}"/>{}</g>"#,
            esc(name),
            text(x + 18.0, y, "", &esc(&shown))
        );
        x += w;
    }
    (svg + "</g>", if drawn.contains(&true) { y - y0 + 18.0 } else { 0.0 })
}

const MIDDLE: &str = r#"text-anchor="middle""#;

/// A text element; `content` is already escaped.
fn text(x: f64, y: f64, attributes: &str, content: &str) -> String {
    format!(r#"<text x="{x:.1}" y="{y:.1}" {attributes}>{content}</text>"#)
}

fn line((x1, y1): (f64, f64), (x2, y2): (f64, f64), colour: &str) -> String {
    format!(r#"<line x1="{x1:.1}" x2="{x2:.1}" y1="{y1:.1}" y2="{y2:.1}" stroke="{colour}"/>"#)
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
