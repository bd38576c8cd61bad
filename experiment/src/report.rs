//! The experiment report: [`write()`] turns the samples into a metrics table (`metrics.csv`,
//! `metrics.md`), SVG charts and a Markdown report (`report.md`) that embeds them, and
//! [`recommend`] derives the report's recommendations from the measured table.
//!
//! Everything written depends only on the samples and their order (no timestamps), so a
//! committed report can be reproduced from the same samples. Models, prompts and presets
//! appear in the order the samples first name them.
//!
//! ```
//! use stencil_experiment::{report, Sample};
//! let samples: Vec<Sample> = (1..=2).map(|seed| Sample::free_text("SmolLM2", "story", "greedy", seed, "Once upon a time", 4)).collect();
//! let dir = std::env::temp_dir().join(format!("stencil-report-doc-{}", std::process::id()));
//! let report = report::write(&dir, "Decoding presets", "One prompt, two seeds.", &samples)?;
//! let md = std::fs::read_to_string(&report.markdown)?;
//! assert!(md.contains("![Repetition per preset: story](rep-story.svg)"));
//! assert!(md.contains("`greedy`: identical across 2 seeds on every prompt"));
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::cmp::Ordering;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::{fs, io};

use crate::chart::{label, BarChart, Distribution};
use crate::metrics::{self, Metrics};
use crate::{Group, Sample};

/// The metrics table, one row per group.
type Table = [(Group, Metrics)];

/// What [`write()`] wrote.
#[derive(Clone, Debug)]
pub struct Report {
    /// `report.md`.
    pub markdown: PathBuf,
    /// The SVG charts, in the order the report embeds them.
    pub charts: Vec<PathBuf>,
    /// The metrics table: one row per group, in the samples' order.
    pub table: Vec<(Group, Metrics)>,
}

/// Writes the report of `samples` into `dir` (created if missing): `metrics.csv`,
/// `metrics.md`, one SVG per chart and `report.md`, whose title is `title` and whose first
/// paragraph is `intro`.
///
/// # Errors
///
/// The first I/O error met while creating `dir` or writing a file.
pub fn write(dir: &Path, title: &str, intro: &str, samples: &[Sample]) -> io::Result<Report> {
    fs::create_dir_all(dir)?;
    let table = ordered(metrics::table(samples), samples);
    fs::write(dir.join("metrics.csv"), csv(&table))?;
    let pairs = unique(table.iter().map(|(g, _)| (g.model.as_str(), g.prompt.as_str())));
    let sections = pairs.into_iter().map(|(m, p)| {
        let rows: Vec<_> = table.iter().filter(|(g, _)| g.model == m && g.prompt == p).collect();
        format!("## {} · {}\n\n{}", code(m), code(p), markdown_table(&rows))
    });
    fs::write(dir.join("metrics.md"), sections.collect::<Vec<_>>().join("\n"))?;
    let mut out = Charts { dir, used: HashSet::new(), paths: Vec::new() };
    let mut md = format!("# {title}\n\n{intro}\n\n{HOW_TO_READ}");
    for prompt in names(&table, |g| &g.prompt) {
        let schema = is_schema(&table, prompt);
        let _ = writeln!(md, "## Prompt {} ({})\n", code(prompt), if schema { "schema" } else { "free text" });
        for (stem, chart) in prompt_charts(&table, prompt, schema) {
            md += &out.write(&format!("{stem}-{}", slug(prompt)), &chart.title, &chart.to_svg())?;
        }
        md += &markdown_table(&table.iter().filter(|(g, _)| g.prompt == prompt).collect::<Vec<_>>());
    }
    md += "## Output length\n\n";
    for model in names(&table, |g| &g.model) {
        let chart = length_chart(samples, &table, model);
        md += &out.write(&format!("length-{}", slug(model)), &chart.title, &chart.to_svg())?;
    }
    md += &determinism(&table);
    md += "## Recommendations\n\n";
    recommend(&table).iter().for_each(|s| md += &format!("- {s}\n"));
    md += &samples_section(&table, samples);
    let markdown = dir.join("report.md");
    fs::write(&markdown, md)?;
    Ok(Report { markdown, charts: out.paths, table })
}

const HOW_TO_READ: &str = "## How to read this\n\n\
Each row is one model, prompt, preset and constraint, over its seeds. Text metrics count \
whitespace-separated words, length counts the model's tokens; the exact definitions are in \
the docs of `stencil_experiment::metrics`.\n\n\
- **n**, **distinct**: samples (one per seed), and how many different texts they gave (1: deterministic).\n\
- **rep-2/3/4** (Su et al., %): share of the n-grams of an output that repeat an earlier one in it; lower is better.\n\
- **diversity** (Su et al., 0–1): (1 − rep-2/100)(1 − rep-3/100)(1 − rep-4/100); higher is less repetitive.\n\
- **seq-rep-2/3/4** (Welleck et al., 0–1): 1 − distinct/all n-grams of each output, mean over the samples.\n\
- **distinct-1/2/3** (Li et al., 0–1): distinct n-grams over all n-grams of all the samples; higher is more varied.\n\
- **self-BLEU** (0–1): mean BLEU-4 of each sample against the others; 1: all alike.\n\
- **length**, **±**: mean and standard deviation of the output length in tokens.\n\
- **parse**, **valid** (schema prompts): share of outputs that parse as JSON, and that also validate against the schema.\n\n";

/// Writes charts into `dir` under unique file names and returns their Markdown links.
struct Charts<'a> {
    dir: &'a Path,
    used: HashSet<String>,
    paths: Vec<PathBuf>,
}

impl Charts<'_> {
    fn write(&mut self, stem: &str, alt: &str, svg: &str) -> io::Result<String> {
        let name = (1..).map(|i| if i == 1 { stem.to_string() } else { format!("{stem}-{i}") });
        let name = name.take(10_000).find(|n| !self.used.contains(n)).unwrap_or_else(|| stem.into());
        self.used.insert(name.clone());
        let path = self.dir.join(format!("{name}.svg"));
        fs::write(&path, svg)?;
        self.paths.push(path);
        Ok(format!("![{}]({name}.svg)\n\n", alt.replace(['[', ']'], "")))
    }
}

/// The recommendations the measured `table` supports: a preset for a deterministic
/// extractor, then one for a brainstorming assistant.
///
/// A preset is deterministic when every seed gave the same output on every prompt (and
/// some prompt had two seeds or more), and varies when some prompt gave different outputs.
/// The extractor is the deterministic preset with the highest valid rate under the schema
/// on schema prompts (tie: lowest rep-4 on free-text prompts). The brainstormer is the
/// varying preset with the highest diversity on free-text prompts among those whose rep-4
/// is not above the least repetitive deterministic preset's (if none, the most diverse).
/// Means are over models and prompts. Presets are named only from the table.
///
/// ```
/// use stencil_experiment::report::recommend;
/// let lines = recommend(&[]);
/// assert_eq!(lines.len(), 2);
/// assert!(lines[0].starts_with("No preset"));
/// ```
pub fn recommend(table: &[(Group, Metrics)]) -> Vec<String> {
    let stats: Vec<Stats> = names(table, |g| &g.preset).into_iter().map(|p| Stats::of(table, p)).collect();
    vec![extractor(table, &stats), brainstormer(table, &stats)]
}

/// What the recommendations need of one preset.
struct Stats<'a> {
    name: &'a str,
    deterministic: bool,
    varies: bool,
    /// Mean valid rate on schema prompts: constrained, free.
    valid: (Option<f64>, Option<f64>),
    /// Mean diversity and rep-4 on free-text prompts.
    diversity: Option<f64>,
    rep4: Option<f64>,
}

impl<'a> Stats<'a> {
    fn of(table: &'a Table, preset: &'a str) -> Stats<'a> {
        let rows: Vec<&(Group, Metrics)> = table.iter().filter(|(g, _)| g.preset == preset).collect();
        let free = || rows.iter().filter(|(g, _)| !is_schema(table, &g.prompt)).map(|(_, m)| m);
        Stats {
            name: preset,
            deterministic: rows.iter().all(|(_, m)| m.distinct_outputs <= 1)
                && rows.iter().any(|(_, m)| m.samples >= 2),
            varies: rows.iter().any(|(_, m)| m.distinct_outputs > 1),
            valid: (valid_rate(table, preset, None, true), valid_rate(table, preset, None, false)),
            diversity: mean(free().map(|m| m.diversity)),
            rep4: mean(free().map(|m| m.rep[2])),
        }
    }
}

/// The mean valid rate of `preset` (of `model`, or all models) on schema prompts.
fn valid_rate(table: &Table, preset: &str, model: Option<&str>, constrained: bool) -> Option<f64> {
    let rows = table
        .iter()
        .filter(|(g, _)| g.preset == preset && g.constrained == constrained && model.map_or(true, |m| g.model == m));
    mean(rows.filter_map(|(_, m)| m.valid_rate))
}

fn extractor(table: &Table, stats: &[Stats]) -> String {
    let order = |a: &&Stats, b: &&Stats| better(a.valid.0, b.valid.0).then(better(neg(a.rep4), neg(b.rep4)));
    let Some(best) = stats.iter().filter(|s| s.deterministic).min_by(order) else {
        return "No preset gave identical outputs across seeds on every prompt, so none suits a deterministic extractor."
            .into();
    };
    let name = code(best.name);
    let Some(constrained) = best.valid.0 else {
        let rep4 = best.rep4.map_or(String::new(), |r| format!(", with rep-4 {} on free-text prompts", pct(Some(r))));
        return format!("For a deterministic extractor use {name}: identical outputs across seeds on every prompt{rep4}; validity under a schema was not measured.");
    };
    let models = names(table, |g| &g.model);
    let rate = |m: &str, c| valid_rate(table, best.name, Some(m), c).map_or("n/a".into(), share);
    let detail = match models.as_slice() {
        [one] => one.to_string(),
        _ => models
            .iter()
            .map(|m| format!("{m}: {} vs {}", rate(m, true), rate(m, false)))
            .collect::<Vec<_>>()
            .join("; "),
    };
    let free = best
        .valid
        .1
        .map_or("with no unconstrained run to compare".into(), |f| format!("against {} without it", share(f)));
    format!("For a deterministic extractor use {name} with the schema: {} of its outputs validated with the schema {free} ({detail}).", share(constrained))
}

fn brainstormer(table: &Table, stats: &[Stats]) -> String {
    if table.iter().all(|(g, _)| is_schema(table, &g.prompt)) {
        return "No free-text prompt was run, so diversity was not measured for a brainstorming assistant.".into();
    }
    let varying: Vec<&Stats> = stats.iter().filter(|s| s.varies && s.diversity.is_some()).collect();
    let least_repetitive = |a: &&Stats, b: &&Stats| better(neg(a.rep4), neg(b.rep4));
    let baseline = stats.iter().filter(|s| s.deterministic && s.rep4.is_some()).min_by(least_repetitive);
    let fits = |s: &&&Stats| baseline.map_or(true, |b| least_repetitive(s, &b) != Ordering::Greater);
    let (pick, fitting) = match (most_diverse(varying.iter().filter(fits)), most_diverse(varying.iter())) {
        (Some(p), _) => (p, true),
        (None, Some(p)) => (p, false),
        (None, None) => return "No preset gave different outputs across seeds on free-text prompts, so none suits a brainstorming assistant.".into(),
    };
    let (name, own) = (code(pick.name), format!("diversity {} and rep-4 {}", num(pick.diversity), pct(pick.rep4)));
    let Some(base) = baseline else {
        return format!("For a brainstorming assistant use {name}: the highest diversity on free-text prompts, {own}; no deterministic preset was run to compare with.");
    };
    let (base_name, base_diversity, base_rep4) = (code(base.name), num(base.diversity), pct(base.rep4));
    let theirs = format!("diversity {base_diversity} and rep-4 {base_rep4} for the deterministic {base_name}");
    if fitting {
        format!("For a brainstorming assistant use {name}: the most diverse preset on free-text prompts that varies across seeds without repeating more, {own}, against {theirs}.")
    } else {
        format!("For a brainstorming assistant use {name}, the most diverse preset on free-text prompts ({own}), though no preset that varies across seeds kept rep-4 at or below the deterministic one's: {theirs}.")
    }
}

/// The first of the most diverse presets.
fn most_diverse<'s, 'a>(presets: impl Iterator<Item = &'s &'s Stats<'a>>) -> Option<&'s Stats<'a>> {
    presets.min_by(|a, b| better(a.diversity, b.diversity)).copied()
}

/// `Less` when `a` is the better (larger) value; `None` is worst; near-equal values tie.
fn better(a: Option<f64>, b: Option<f64>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) if (a - b).abs() <= 1e-9 => Ordering::Equal,
        (Some(a), Some(b)) => b.total_cmp(&a),
        (a, b) => b.is_some().cmp(&a.is_some()),
    }
}

/// `-v`: turns "lower is better" into what [`better`] compares.
fn neg(v: Option<f64>) -> Option<f64> {
    v.map(|v| -v)
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let v: Vec<f64> = values.filter(|v| v.is_finite()).collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// The Determinism section: per model and preset, whether the seeds agreed.
fn determinism(table: &Table) -> String {
    let mut md = String::from("## Determinism\n\nWhether all seeds gave byte-identical outputs, per prompt run.\n\n");
    for model in names(table, |g| &g.model) {
        let mut lines = Vec::new();
        for p in names(table, |g| &g.preset) {
            let rows: Vec<&Metrics> =
                table.iter().filter(|(g, _)| g.model == model && g.preset == p).map(|(_, m)| m).collect();
            if !rows.is_empty() {
                lines.push(format!("{}: {}", code(p), seeds_agree(&rows)));
            }
        }
        let _ = writeln!(md, "- **{}**: {}.", model.replace('*', ""), lines.join("; "));
    }
    md + "\n"
}

/// "identical across 4 seeds on every prompt", or "3–4 different outputs of 4 (identical
/// on 1 of 3 runs)".
fn seeds_agree(rows: &[&Metrics]) -> String {
    let range = |v: Vec<usize>| match (v.iter().min(), v.iter().max()) {
        (Some(lo), Some(hi)) if lo != hi => format!("{lo}–{hi}"),
        (_, hi) => hi.copied().unwrap_or(0).to_string(),
    };
    let seeds = range(rows.iter().map(|m| m.samples).collect());
    let varying: Vec<usize> = rows.iter().map(|m| m.distinct_outputs).filter(|&d| d > 1).collect();
    let (n, total) = (varying.len(), rows.len());
    match n {
        0 if rows.iter().all(|m| m.samples < 2) => "one seed only, not measured".into(),
        0 => format!("identical across {seeds} seeds on every prompt"),
        _ if n == total => format!("{} different outputs of {seeds}", range(varying)),
        _ => format!("{} different outputs of {seeds} (identical on {} of {total} runs)", range(varying), total - n),
    }
}

/// The charts of one prompt, with their file-name stems.
fn prompt_charts(table: &Table, prompt: &str, schema: bool) -> Vec<(&'static str, BarChart)> {
    let rows: Vec<&(Group, Metrics)> = table.iter().filter(|(g, _)| g.prompt == prompt).collect();
    let presets = names(table, |g| &g.preset)
        .into_iter()
        .filter(|p| rows.iter().any(|(g, _)| g.preset == *p))
        .collect::<Vec<_>>();
    let models = names(table, |g| &g.model);
    let value = |model: &str, constrained: bool, f: &dyn Fn(&Metrics) -> Option<f64>| -> Vec<f64> {
        let cell =
            |p: &&str| rows.iter().find(|(g, _)| g.model == model && g.preset == *p && g.constrained == constrained);
        presets.iter().map(|p| cell(p).and_then(|(_, m)| f(m)).unwrap_or(f64::NAN)).collect()
    };
    let chart = |title: String, y_label: &str, y_max, series| BarChart {
        title,
        y_label: y_label.into(),
        categories: presets.iter().map(|p| p.to_string()).collect(),
        series,
        y_max,
    };
    if schema {
        let valid = |m: &Metrics| m.valid_rate.map(|v| v * 100.0);
        let series = models.iter().flat_map(|m| {
            [(true, "constrained"), (false, "free")].map(|(c, how)| (format!("{m}, {how}"), value(m, c, &valid)))
        });
        let title = format!("Valid outputs with and without the schema: {prompt}");
        return vec![("valid", chart(title, "valid (%)", Some(100.0), series.collect()))];
    }
    let rep =
        models.iter().flat_map(|m| [2, 4].map(|n| (format!("{m} rep-{n}"), value(m, false, &|x| Some(x.rep[n - 2])))));
    let diversity = models.iter().map(|m| (m.to_string(), value(m, false, &|x| Some(x.diversity))));
    vec![
        ("rep", chart(format!("Repetition per preset: {prompt}"), "rep-n (%)", None, rep.collect())),
        ("diversity", chart(format!("Diversity per preset: {prompt}"), "diversity", Some(1.0), diversity.collect())),
    ]
}

/// The length distribution of `model`'s outputs per preset, over all prompts.
fn length_chart(samples: &[Sample], table: &Table, model: &str) -> Distribution {
    let groups = names(table, |g| &g.preset).into_iter().map(|p| {
        let lengths = samples.iter().filter(|s| s.model == model && s.preset == p).map(|s| s.tokens as f64);
        (p.to_string(), lengths.collect::<Vec<_>>())
    });
    Distribution {
        title: format!("Output length per preset: {model}"),
        x_label: "tokens (all prompts)".into(),
        groups: groups.filter(|(_, v)| !v.is_empty()).collect(),
    }
}

/// The first sample of every group, truncated, each in a fence its text cannot close.
fn samples_section(table: &Table, samples: &[Sample]) -> String {
    let mut md = String::from("\n## Samples\n\nThe first seed's output of each run, cut at 400 characters.\n\n");
    for (g, _) in table {
        let same = |s: &&Sample| s.model == g.model && s.prompt == g.prompt && s.preset == g.preset;
        let Some(s) = samples.iter().find(|s| same(s) && s.constrained == g.constrained) else { continue };
        let mut text: String = s.text.chars().take(400).collect();
        if s.text.chars().count() > 400 {
            text.push('…');
        }
        let run = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
        let fence = "`".repeat(run.max(2) + 1);
        let how = if g.constrained { " · constrained" } else { "" };
        let lang = if s.parses.is_some() { "json" } else { "text" };
        let _ = writeln!(
            md,
            "### {} · {} · {}{how}\n\n{fence}{lang}\n{text}\n{fence}\n",
            code(&g.model),
            code(&g.prompt),
            code(&g.preset)
        );
    }
    md
}

const COLUMNS: &str = "samples,distinct_outputs,rep-2,rep-3,rep-4,diversity,seq-rep-2,seq-rep-3,seq-rep-4,\
distinct-1,distinct-2,distinct-3,self-bleu,length_mean,length_std,parse_rate,valid_rate";

/// The metrics in [`COLUMNS`] order, `None` for a missing or non-finite value.
fn values(m: &Metrics) -> Vec<Option<f64>> {
    let counts = [m.samples, m.distinct_outputs].map(|n| Some(n as f64));
    let floats = m.rep.iter().chain([&m.diversity]).chain(&m.seq_rep).chain(&m.distinct).map(|&v| Some(v));
    let rest = [m.self_bleu, Some(m.length_mean), Some(m.length_std), m.parse_rate, m.valid_rate];
    counts.into_iter().chain(floats).chain(rest).map(|v| v.filter(|v| v.is_finite())).collect()
}

/// `metrics.csv`: a header, then one row per group; an empty cell for a missing value.
fn csv(table: &Table) -> String {
    let quote =
        |s: &str| if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.into() };
    let mut out = format!("model,prompt,preset,constrained,{COLUMNS}\n");
    for (g, m) in table {
        let cells: Vec<String> = values(m).iter().map(|v| v.map_or(String::new(), |v| v.to_string())).collect();
        let (model, prompt, preset) = (quote(&g.model), quote(&g.prompt), quote(&g.preset));
        let _ = writeln!(out, "{model},{prompt},{preset},{},{}", g.constrained, cells.join(","));
    }
    out
}

/// A Markdown table of `rows`: counts as integers, shares of JSON outputs in percent.
fn markdown_table(rows: &[&(Group, Metrics)]) -> String {
    let header = "| model | preset | constrained | n | distinct | rep-2 | rep-3 | rep-4 | diversity | seq-rep-2 | seq-rep-3 | seq-rep-4 | distinct-1 | distinct-2 | distinct-3 | self-BLEU | length | ± | parse | valid |";
    let mut md = format!("{header}\n|{}\n", "---|".repeat(20));
    for (g, m) in rows {
        let cells = values(m).into_iter().enumerate().map(|(i, v)| match (i, v) {
            (_, None) => "–".to_string(),
            (0 | 1, Some(v)) => format!("{v:.0}"),
            (15 | 16, Some(v)) => share(v),
            (_, Some(v)) => format!("{v:.2}"),
        });
        let cell = |s: &str| s.replace('|', "\\|").replace(['\n', '\r'], " ");
        let (model, preset, constrained) = (cell(&g.model), cell(&g.preset), if g.constrained { "yes" } else { "no" });
        let _ = writeln!(md, "| {model} | {preset} | {constrained} | {} |", cells.collect::<Vec<_>>().join(" | "));
    }
    md + "\n"
}

/// The table sorted in the order the samples first name models, prompts and presets.
fn ordered(mut table: Vec<(Group, Metrics)>, samples: &[Sample]) -> Vec<(Group, Metrics)> {
    let rank = |f: fn(&Sample) -> &str, v: &str| samples.iter().position(|s| f(s) == v);
    table.sort_by_key(|(g, _)| {
        (rank(|s| &s.model, &g.model), rank(|s| &s.prompt, &g.prompt), rank(|s| &s.preset, &g.preset), !g.constrained)
    });
    table
}

/// The distinct values of `key` in the table, in order.
fn names(table: &Table, key: fn(&Group) -> &String) -> Vec<&str> {
    unique(table.iter().map(|(g, _)| key(g).as_str()))
}

/// The distinct items, in order.
fn unique<T: PartialEq>(items: impl Iterator<Item = T>) -> Vec<T> {
    items.fold(Vec::new(), |mut seen, item| {
        if !seen.contains(&item) {
            seen.push(item);
        }
        seen
    })
}

/// Whether `prompt` has a schema: some run of it was constrained or measured validity.
fn is_schema(table: &Table, prompt: &str) -> bool {
    table.iter().any(|(g, m)| g.prompt == prompt && (g.constrained || m.valid_rate.is_some()))
}

/// A file-name stem: lowercase `[a-z0-9-]`, runs of anything else as one `-`.
fn slug(s: &str) -> String {
    let mapped: String =
        s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    let slug = mapped.split('-').filter(|p| !p.is_empty()).collect::<Vec<_>>().join("-");
    Some(slug).filter(|s| !s.is_empty()).unwrap_or_else(|| "x".into())
}

fn code(s: &str) -> String {
    format!("`{}`", s.replace('`', "'"))
}

fn share(v: f64) -> String {
    format!("{:.0} %", v * 100.0)
}

fn pct(v: Option<f64>) -> String {
    v.map_or("n/a".into(), |v| format!("{} %", label(v)))
}

fn num(v: Option<f64>) -> String {
    v.map_or("n/a".into(), label)
}
