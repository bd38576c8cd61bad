//! The study's report: [`write()`] turns a [`Study`], its [`Run`] and its samples into
//! `metrics.csv` (every metric of every point, with its interval), SVG charts and
//! `report.md`, whose conclusions come from [`crate::findings`].
//!
//! Everything written depends only on the study, the run record and the samples (no
//! clock, no randomness but seeded resampling), so a committed report can be re-rendered
//! from its `samples.jsonl` and must come out byte for byte the same.
//!
//! ```
//! use stencil_experiment::{report::{self, Run}, study::Study, Sample};
//! let study = Study::from_toml(r#"
//!     title = "Tiny"
//!     models = [{ file = "m.gguf", name = "M" }]
//!     [[sweep]]
//!     name = "temperature"
//!     parameter = "temperature"
//!     values = [0.0, 1.0]
//!     [[task]]
//!     name = "story"
//!     max_tokens = 8
//!     prompts = [{ id = "p1", text = "Once" }]
//! "#)?;
//! let mut samples = vec![Sample::text("M", "story", "p1", "T 0", 1, "upon a time", &[1, 2, 3])];
//! samples.extend((1..=2).map(|seed| Sample::text("M", "story", "p1", "T 1", seed, "there was", &[4, 5])));
//! let dir = std::env::temp_dir().join(format!("stencil-report-doc-{}", std::process::id()));
//! let run = Run { commit: "abc".into(), dirty: false, seconds: 1.0, decode_seconds: 0.5, cpu_seconds: None, threads: 1, quick: false };
//! let written = report::write(&dir, &study, &run, &samples)?;
//! let md = std::fs::read_to_string(&written.markdown)?;
//! assert!(md.contains("commit `abc`") && md.contains("](sweep-temperature.svg)"));
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::{fs, io};

use serde::{Deserialize, Serialize};

use crate::chart::{label, Dot, Figure, Lines, Panel, Scatter};
use crate::findings;
use crate::points::{self, Key, Metric, Point, Unit};
use crate::stats::Estimate;
use crate::study::{Parameter, Study, Sweep, Task};
use crate::{Failure, Sample};

/// What is known of the run that decoded the samples (`run.json` beside them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Run {
    /// The commit of the code that ran (`git rev-parse`), or `unknown`.
    pub commit: String,
    /// Whether the work tree had uncommitted changes to tracked files.
    pub dirty: bool,
    /// Wall-clock seconds of decoding and scoring.
    pub seconds: f64,
    /// Of which decoding.
    pub decode_seconds: f64,
    /// CPU seconds the run used (all threads), when the system says.
    pub cpu_seconds: Option<f64>,
    /// llama.cpp threads.
    pub threads: u32,
    /// The `--quick` variant.
    pub quick: bool,
}

/// What [`write()`] wrote.
#[derive(Clone, Debug)]
pub struct Report {
    /// `report.md`.
    pub markdown: PathBuf,
    /// The SVG charts, in the order the report embeds them.
    pub charts: Vec<PathBuf>,
    /// Every point, in the samples' order.
    pub points: Vec<Point>,
}

/// The points of a study, looked up by key.
pub struct Points<'a> {
    /// The study.
    pub study: &'a Study,
    by_key: HashMap<Key, &'a Point>,
}

impl<'a> Points<'a> {
    /// An index over `points`.
    pub fn new(study: &'a Study, points: &'a [Point]) -> Points<'a> {
        Points { study, by_key: points.iter().map(|p| (p.key.clone(), p)).collect() }
    }

    /// The point of `model`, `task`, the setting labelled `setting`, `constrained`.
    pub fn get(&self, model: &str, task: &str, setting: &str, constrained: bool) -> Option<&'a Point> {
        let key = Key { model: model.into(), task: task.into(), setting: setting.into(), constrained };
        self.by_key.get(&key).copied()
    }

    /// The estimate of `metric` at a point.
    pub fn metric(
        &self,
        model: &str,
        task: &str,
        setting: &str,
        constrained: bool,
        metric: Metric,
    ) -> Option<Estimate> {
        self.get(model, task, setting, constrained)?.get(metric)
    }
}

/// The constraint variants a task runs: under its schema, and free (text tasks: free only).
pub fn variants(task: &Task) -> Vec<bool> {
    match (task.schema.is_some(), task.free) {
        (true, true) => vec![true, false],
        (true, false) => vec![true],
        (false, _) => vec![false],
    }
}

/// Writes the report of `samples` into `dir` (created if missing): `metrics.csv`, the
/// charts and `report.md`.
///
/// # Errors
///
/// The first I/O error met while creating `dir` or writing a file.
pub fn write(dir: &Path, study: &Study, run: &Run, samples: &[Sample]) -> io::Result<Report> {
    fs::create_dir_all(dir)?;
    let all = points::points(samples);
    let index = Points::new(study, &all);
    fs::write(dir.join("metrics.csv"), csv(&all))?;
    let mut charts = Charts { dir, paths: Vec::new() };
    let mut md = header(study, run, samples);
    md += &what_ran(study, samples);
    md += HOW_TO_READ;
    md += "## Conclusions\n\n";
    md += &findings::conclusions(&index);
    md += "## Sweeps\n\n";
    for sweep in &study.sweeps {
        md += &sweep_section(&index, sweep, &mut charts)?;
    }
    md += &quality_section(&index, &mut charts)?;
    md += &cut_section(study, samples);
    md += &examples(study, samples);
    let markdown = dir.join("report.md");
    fs::write(&markdown, md)?;
    Ok(Report { markdown, charts: charts.paths, points: all })
}

fn header(study: &Study, run: &Run, samples: &[Sample]) -> String {
    let dirty = if run.dirty { " with uncommitted changes" } else { "" };
    let cpu = run.cpu_seconds.map_or(String::new(), |c| format!("; {:.1} CPU-minutes", c / 60.0));
    let quick = if run.quick { " This is the `--quick` variant: a smoke test, not a study." } else { "" };
    format!(
        "# {}\n\n{}\n\n**Provenance.** Decoded and scored by `stencil experiment` at commit `{}`{dirty}: {} outputs in {:.1} \
         minutes ({:.1} decoding, {:.1} scoring{cpu}), one thread per model, {} llama.cpp thread(s) each.{quick} Every output, its token ids, its stop reason and its scores are in \
         `samples.jsonl.gz` (one JSON object per line); `stencil experiment FILE --out DIR --report-only` re-renders \
         this report from it, and a test checks that the result is this file.\n\n",
        study.title,
        study.intro.trim(),
        run.commit,
        samples.len(),
        run.seconds / 60.0,
        run.decode_seconds / 60.0,
        (run.seconds - run.decode_seconds) / 60.0,
        run.threads,
    )
}

fn what_ran(study: &Study, samples: &[Sample]) -> String {
    let mut md = String::from("## What ran\n\n| model | file | read by |\n|---|---|---|\n");
    for (i, m) in study.models.iter().enumerate() {
        let _ = writeln!(md, "| {} | `{}` | {} |", m.name, m.file, study.models[study.scorer_of(i)].name);
    }
    let _ = write!(
        md,
        "\nThe model in the last column reads each output of the first: its perplexity, and its embeddings of the \
         prompt and of the output for coherence (the mean of the model's last hidden state, after its final norm, over \
         the prompt's tokens and over the output's, in the one pass that reads the prompt then the output and scores \
         its perplexity: the output's states see the prompt). So neither perplexity nor coherence compares across the models; \
         both compare settings of one model.\n\n| task | prompts | token cap | schema | runs |\n|---|---|---|---|---|\n"
    );
    for t in &study.tasks {
        let runs = match variants(t).as_slice() {
            [true, false] => "constrained and free",
            [true] => "constrained",
            _ => "free",
        };
        let schema = t.schema.as_deref().map_or("—".into(), |s| format!("`{s}`"));
        let _ = writeln!(md, "| {} | {} | {} | {schema} | {runs} |", t.name, t.prompts.len(), t.max_tokens);
    }
    md += "\n| sweep | parameter | base | values | tasks |\n|---|---|---|---|---|\n";
    for s in &study.sweeps {
        let values: Vec<String> = s.values.iter().map(|v| format!("{v}")).collect();
        let tasks = s.tasks.as_ref().map_or("all".into(), |t| t.join(", "));
        let _ = writeln!(md, "| {} | {} | {} | {} | {tasks} |", s.name, s.parameter.axis(), base(s), values.join(", "));
    }
    let settings = study.settings();
    let deterministic = settings.iter().filter(|s| s.is_deterministic()).count();
    let _ = write!(
        md,
        "\n{} distinct settings ({deterministic} deterministic): points of different sweeps that decode alike (greedy \
         decoding is temperature 0, repetition penalty 1 at temperature 0, contrastive α 0 …) are decoded once and \
         shown in each. Sampled settings run {} seeds per prompt (seed {} to {}, batched: one forward pass per step \
         for all seeds); deterministic ones run once per prompt, so their intervals are over prompts. {} outputs \
         in all.\n\n",
        settings.len(),
        study.seeds,
        study.seed,
        study.seed + study.seeds as u64 - 1,
        samples.len()
    );
    md
}

/// A sweep's base setting, as the sweeps table shows it.
fn base(sweep: &Sweep) -> String {
    let d = crate::study::Setting::default();
    let b = &sweep.base;
    let mut parts = Vec::new();
    let mut show = |p: Parameter, on: bool, v: String| {
        if p != sweep.parameter && on {
            parts.push(format!("{} {v}", p.axis().split(' ').next().unwrap_or("")));
        }
    };
    show(Parameter::Temperature, true, format!("{}", b.temperature));
    show(Parameter::TopP, b.top_p != d.top_p, format!("{}", b.top_p));
    show(Parameter::TopK, b.top_k != d.top_k, b.top_k.to_string());
    show(Parameter::MinP, b.min_p != d.min_p, format!("{}", b.min_p));
    show(
        Parameter::RepetitionPenalty,
        b.repetition_penalty != d.repetition_penalty,
        format!("{}", b.repetition_penalty),
    );
    show(
        Parameter::NoRepeatNgramSize,
        b.no_repeat_ngram_size != d.no_repeat_ngram_size,
        b.no_repeat_ngram_size.to_string(),
    );
    show(Parameter::PenaltyAlpha, b.penalty_alpha != d.penalty_alpha, format!("{}", b.penalty_alpha));
    let rest = if sweep.parameter == Parameter::Temperature { "top-p 1, top-k off" } else { "the rest off" };
    if parts.is_empty() {
        rest.into()
    } else {
        format!("{}; {rest}", parts.join(", "))
    }
}

const HOW_TO_READ: &str = "## How to read this\n\n\
A **point** is one model, task, setting and constraint, over the task's prompts and their seeds. Every number is \
the point's value with its **95 % bootstrap interval** in parentheses: 1000 resamples of the prompts and, within \
each drawn prompt, of its seeds (`stencil_experiment::stats`). **A difference is called a difference only when \
the two intervals do not overlap**; overlapping intervals are reported as no difference the data support.\n\n\
Text metrics count n-grams of two units, both reported: the model's **tokens** (which see `Lambda-Lambda-…` or a \
run of digits as repetition; they compare within one model only) and whitespace-separated **words** (which \
compare across models). Definitions are in the docs of `stencil_experiment::metrics` and `::points`.\n\n\
- **rep-n** (Su et al. 2022, %): share of an output's n-grams that repeat an earlier n-gram of it, pooled over \
the point's outputs as their code pools them; lower is less repetitive. **diversity** = Π(1 − rep-n/100), n = 2, 3, 4.\n\
- **seq-rep-n** (Welleck et al. 2019): 1 − distinct/all n-grams of one output, averaged.\n\
- **distinct-n** (Li et al. 2016) and **self-BLEU** (Zhu et al. 2018): computed over one prompt's seeds, averaged \
over prompts: how different the seeds' outputs are from each other (sampled settings only; a deterministic \
setting has one output per prompt).\n\
- **perplexity**: the *other* model reads each output after the prompt (as it would be given it: its own chat \
template, or the plain text) and scores every token; a point's perplexity is exp of the mean over outputs of the \
mean negative log-likelihood per token. Lower is more fluent to the reader — but repetitive text is cheap to \
predict, so perplexity alone rewards degeneration: read it against diversity.\n\
- **coherence** (Su et al. 2022): the cosine similarity of the prompt's and the output's embeddings by the other \
model; higher is more on topic. Embeddings of a causal model's hidden states are anisotropic (all cosines are high): compare \
points, not the absolute value.\n\
- **cut**: outputs stopped by the token cap (counted, never hidden); **length**: mean tokens or words.\n\
- **parse**, **valid**, **correct** (schema tasks): outputs that parse as JSON (the whole text, or a Markdown \
code fence that is the whole text), that also validate against the schema, and that hold the prompt's expected \
answer. An invalid output failed for one reason: cut by the token cap, bad JSON, or a schema violation.\n\n";

/// Writes charts into `dir` and returns their Markdown links.
struct Charts<'a> {
    dir: &'a Path,
    paths: Vec<PathBuf>,
}

impl Charts<'_> {
    /// Writes `figure` as `STEM.svg` (`STEM-2.svg`, ... when taken) and returns its link.
    fn write(&mut self, stem: &str, figure: &Figure) -> io::Result<String> {
        let taken = |s: &str| self.paths.iter().any(|p| p.file_stem().is_some_and(|f| f == s));
        let stem = (1..)
            .map(|i| if i == 1 { stem.to_string() } else { format!("{stem}-{i}") })
            .find(|s| !taken(s))
            .unwrap_or_default();
        let path = self.dir.join(format!("{stem}.svg"));
        fs::write(&path, figure.to_svg())?;
        self.paths.push(path);
        Ok(format!("![{}]({stem}.svg)\n\n", figure.title.replace(['[', ']'], "")))
    }
}

/// The metrics a sweep chart draws for a free-text task, top to bottom, with a log axis.
const TEXT_CHART: [(Metric, bool); 6] = [
    (Metric::Diversity(Unit::Words), false),
    (Metric::Diversity(Unit::Tokens), false),
    (Metric::SelfBleu(Unit::Words), false),
    (Metric::Perplexity, true),
    (Metric::Coherence, false),
    (Metric::Length(Unit::Tokens), false),
];

/// The metrics a sweep chart draws for a schema task.
const SCHEMA_CHART: [(Metric, bool); 3] = [(Metric::Valid, false), (Metric::Correct, false), (Metric::Cut, false)];

/// The columns of a sweep's table for a free-text task.
const TEXT_COLUMNS: [Metric; 10] = [
    Metric::Length(Unit::Tokens),
    Metric::Rep(4, Unit::Tokens),
    Metric::Rep(4, Unit::Words),
    Metric::Diversity(Unit::Tokens),
    Metric::Diversity(Unit::Words),
    Metric::Distinct(2, Unit::Words),
    Metric::SelfBleu(Unit::Words),
    Metric::Perplexity,
    Metric::Coherence,
    Metric::SeqRep(4, Unit::Tokens),
];

/// The columns of a sweep's table for a schema task.
const SCHEMA_COLUMNS: [Metric; 6] = [
    Metric::Length(Unit::Tokens),
    Metric::Parse,
    Metric::Valid,
    Metric::Correct,
    Metric::Diversity(Unit::Words),
    Metric::Perplexity,
];

fn sweep_section(index: &Points, sweep: &Sweep, charts: &mut Charts) -> io::Result<String> {
    let study = index.study;
    let tasks: Vec<&Task> =
        study.tasks.iter().filter(|t| study.sweeps_of(&t.name).any(|s| s.name == sweep.name)).collect();
    let mut md =
        format!("### {}\n\nBase: {}; {}: {}.\n\n", sweep.name, base(sweep), sweep.parameter.axis(), values(sweep));
    let x: Vec<String> = sweep.values.iter().map(|v| format!("{v}")).collect();
    let models: Vec<String> = study.models.iter().map(|m| m.name.clone()).collect();
    let text_tasks: Vec<&&Task> = tasks.iter().filter(|t| t.schema.is_none()).collect();
    if !text_tasks.is_empty() {
        let mut panels = Vec::new();
        for (metric, log_y) in TEXT_CHART {
            for task in &text_tasks {
                let series = models
                    .iter()
                    .enumerate()
                    .map(|(i, m)| (i, sweep_values(index, sweep, m, &task.name, false, metric)))
                    .collect();
                panels.push(sweep_panel(sweep, &task.name, metric, log_y, &x, series));
            }
        }
        let figure = Figure {
            title: format!("Sweep: {}", sweep.name),
            legend: models.clone(),
            columns: text_tasks.len(),
            panels,
        };
        md += &charts.write(&format!("sweep-{}", slug(&sweep.name)), &figure)?;
    }
    for task in tasks.iter().filter(|t| t.schema.is_some()) {
        let mut legend = Vec::new();
        let mut keys = Vec::new();
        for m in &models {
            for c in variants(task) {
                legend.push(format!("{m} · {}", if c { "constrained" } else { "free" }));
                keys.push((m.clone(), c));
            }
        }
        let panels = SCHEMA_CHART
            .iter()
            .map(|&(metric, log_y)| {
                let series = keys
                    .iter()
                    .enumerate()
                    .map(|(i, (m, c))| (i, sweep_values(index, sweep, m, &task.name, *c, metric)))
                    .collect();
                sweep_panel(sweep, &task.name, metric, log_y, &x, series)
            })
            .collect();
        let figure = Figure {
            title: format!("{}: free vs constrained, by {}", task.name, sweep.name),
            legend,
            columns: 3,
            panels,
        };
        md += &charts.write(&format!("schema-{}-{}", slug(&task.name), slug(&sweep.name)), &figure)?;
    }
    md += &findings::sweep_findings(index, sweep, &tasks);
    for task in &tasks {
        md += &sweep_table(index, sweep, task);
    }
    Ok(md)
}

fn values(sweep: &Sweep) -> String {
    let v: Vec<String> = sweep.values.iter().map(|v| format!("{v}")).collect();
    v.join(", ")
}

/// A metric's estimate at each value of `sweep`.
fn sweep_values(
    index: &Points,
    sweep: &Sweep,
    model: &str,
    task: &str,
    constrained: bool,
    metric: Metric,
) -> Vec<Option<Estimate>> {
    sweep.points().map(|(_, s)| index.metric(model, task, &s.label(), constrained, metric)).collect()
}

/// A panel of `metric` on `task` against `sweep`'s values (`x`), a line per series.
fn sweep_panel(
    sweep: &Sweep,
    task: &str,
    metric: Metric,
    log_y: bool,
    x: &[String],
    series: Vec<(usize, Vec<Option<Estimate>>)>,
) -> Panel {
    Panel::Lines(Lines {
        title: format!("{task} · {}", metric.name()),
        y_label: axis_label(metric),
        x_label: sweep.parameter.axis().into(),
        x: x.to_vec(),
        series,
        log_y,
    })
}

fn axis_label(metric: Metric) -> String {
    match metric {
        m if m.is_share() => format!("{} (share)", m.name()),
        Metric::Perplexity => "perplexity (log)".into(),
        m => m.name(),
    }
}

fn sweep_table(index: &Points, sweep: &Sweep, task: &Task) -> String {
    let schema = task.schema.is_some();
    let columns: &[Metric] = if schema { &SCHEMA_COLUMNS } else { &TEXT_COLUMNS };
    let mut md = format!(
        "Task **{}**:\n\n| model | {} | setting |{} outputs | cut |",
        task.name,
        short(sweep.parameter),
        if schema { " schema |" } else { "" }
    );
    for m in columns {
        let _ = write!(md, " {} |", m.name());
    }
    md += "\n|---|---|---|";
    md += &"---|".repeat(2 + usize::from(schema) + columns.len());
    md += "\n";
    for model in &index.study.models {
        for (value, setting) in sweep.points() {
            for c in variants(task) {
                let label = setting.label();
                let Some(p) = index.get(&model.name, &task.name, &label, c) else { continue };
                let _ = write!(md, "| {} | {value} | {label} |", model.name);
                if schema {
                    md += if c { " constrained |" } else { " free |" };
                }
                let _ = write!(md, " {} | {} |", p.outputs, p.cut);
                for &m in columns {
                    let _ = write!(md, " {} |", cell(p.get(m), m));
                }
                md += "\n";
            }
        }
    }
    md + "\n"
}

fn short(p: Parameter) -> &'static str {
    p.axis().split(" (").next().unwrap_or("value")
}

/// An estimate as a table cell: `0.45 (0.4–0.5)`, shares in percent (`45 % (40–50)`); the
/// value alone when the interval rounds to it; `—` when missing.
///
/// ```
/// use stencil_experiment::{points::Metric, report::cell, stats::Estimate};
/// let e = |value, lo, hi| Some(Estimate { value, lo, hi });
/// assert_eq!(cell(e(0.45, 0.4, 0.5), Metric::Coherence), "0.45 (0.4–0.5)");
/// assert_eq!(cell(e(0.5, 0.25, 1.0), Metric::Valid), "50 % (25–100)");
/// assert_eq!(cell(e(0.3, 0.3001, 0.2999), Metric::Coherence), "0.3");
/// assert_eq!(cell(None, Metric::Coherence), "—");
/// ```
pub fn cell(e: Option<Estimate>, metric: Metric) -> String {
    let Some(e) = e else { return "—".into() };
    let scale = if metric.is_share() { 100.0 } else { 1.0 };
    let [v, lo, hi] = [e.value, e.lo, e.hi].map(|x| label(x * scale));
    let unit = if metric.is_share() { " %" } else { "" };
    if lo == v && hi == v {
        format!("{v}{unit}")
    } else {
        format!("{v}{unit} ({lo}–{hi})")
    }
}

fn quality_section(index: &Points, charts: &mut Charts) -> io::Result<String> {
    let study = index.study;
    let mut md = String::from(
        "## Quality against diversity\n\nEach point is one setting (all sweeps, pooled), its diversity (words) against \
         the other model's perplexity and against coherence. The dashed line is each model's frontier: the settings \
         no other setting of the model beats on both axes (labelled). Settings off the frontier are dominated.\n\n",
    );
    let models: Vec<String> = study.models.iter().map(|m| m.name.clone()).collect();
    for task in study.tasks.iter().filter(|t| t.schema.is_none()) {
        let settings = study.settings_of(&task.name);
        let plane = |y: Metric| -> Vec<(usize, Vec<Dot>)> {
            models
                .iter()
                .enumerate()
                .map(|(i, m)| {
                    let pts = settings
                        .iter()
                        .filter_map(|s| {
                            let l = s.label();
                            let x = index.metric(m, &task.name, &l, false, Metric::Diversity(Unit::Words))?;
                            let y = index.metric(m, &task.name, &l, false, y)?;
                            Some((x.value, y.value, l))
                        })
                        .collect();
                    (i, pts)
                })
                .collect()
        };
        let panels = vec![
            Panel::Scatter(Scatter {
                title: format!("{} · perplexity", task.name),
                x_label: "diversity (words)".into(),
                y_label: "perplexity (log)".into(),
                series: plane(Metric::Perplexity),
                log_y: true,
                better: (true, false),
            }),
            Panel::Scatter(Scatter {
                title: format!("{} · coherence", task.name),
                x_label: "diversity (words)".into(),
                y_label: "coherence".into(),
                series: plane(Metric::Coherence),
                log_y: false,
                better: (true, true),
            }),
        ];
        let figure = Figure {
            title: format!("Quality against diversity: {}", task.name),
            legend: models.clone(),
            columns: 2,
            panels,
        };
        md += &charts.write(&format!("quality-{}", slug(&task.name)), &figure)?;
        md += &findings::frontier_table(index, task);
    }
    Ok(md)
}

fn cut_section(study: &Study, samples: &[Sample]) -> String {
    let mut md = String::from(
        "## Every cut counted\n\nOutputs stopped by the token cap, per model and task (free-text outputs are often cut \
         mid-sentence: the cap bounds the cost of the study; the tables' **cut** column gives each point's count). For \
         schema tasks, why each invalid output failed.\n\n| model | task | run | outputs | cut | cut by the token \
         cap | bad JSON | schema violation | valid |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for m in &study.models {
        for t in &study.tasks {
            for c in variants(t) {
                let of: Vec<&Sample> =
                    samples.iter().filter(|s| s.model == m.name && s.task == t.name && s.constrained == c).collect();
                if of.is_empty() {
                    continue;
                }
                let cut = of.iter().filter(|s| s.is_cut()).count();
                let count = |f: Failure| of.iter().filter(|s| s.outcome() == Some(Err(f))).count().to_string();
                let valid = of.iter().filter(|s| s.outcome() == Some(Ok(()))).count();
                let run = if t.schema.is_none() {
                    "free text"
                } else if c {
                    "constrained"
                } else {
                    "free"
                };
                let (a, b, d, v) = if t.schema.is_some() {
                    (count(Failure::Cut), count(Failure::BadJson), count(Failure::SchemaViolation), valid.to_string())
                } else {
                    ("—".into(), "—".into(), "—".into(), "—".into())
                };
                let _ =
                    writeln!(md, "| {} | {} | {run} | {} | {cut} | {a} | {b} | {d} | {v} |", m.name, t.name, of.len());
            }
        }
    }
    md + "\n"
}

/// A few outputs per task: the first prompt's greedy, sampled (T 1) and contrastive outputs
/// of each model, seed 1, each with its stop reason.
fn examples(study: &Study, samples: &[Sample]) -> String {
    let mut md = String::from("## Examples\n\nThe first prompt of each task, the first seed, under a few settings; every cut output says so.\n\n");
    for task in &study.tasks {
        let Some(prompt) = task.prompts.first() else { continue };
        let _ = writeln!(md, "### {}: `{}`\n\n> {}\n", task.name, prompt.id, prompt.text.replace('\n', "\n> "));
        let wanted = ["T 0", "T 1", "α 0.6 k 4"];
        for m in &study.models {
            for setting in wanted {
                for c in variants(task) {
                    let Some(s) = samples
                        .iter()
                        .filter(|s| {
                            s.model == m.name
                                && s.task == task.name
                                && s.prompt == prompt.id
                                && s.setting == setting
                                && s.constrained == c
                        })
                        .min_by_key(|s| s.seed)
                    else {
                        continue;
                    };
                    let constraint = if task.schema.is_none() {
                        ""
                    } else if c {
                        ", constrained"
                    } else {
                        ", free"
                    };
                    let stop = if s.is_cut() {
                        format!("**cut** at {} tokens", s.tokens.len())
                    } else {
                        format!("{}, {} tokens", s.stop, s.tokens.len())
                    };
                    let fence = "`".repeat(longest_backtick_run(&s.text).max(2) + 1);
                    let _ = writeln!(
                        md,
                        "**{}**, {setting}{constraint} (seed {}; {stop}):\n\n{fence}text\n{}\n{fence}\n",
                        m.name, s.seed, s.text
                    );
                }
            }
        }
    }
    md
}

fn longest_backtick_run(s: &str) -> usize {
    s.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// `metrics.csv`: per point its key, counts, and per metric the value and interval.
fn csv(points: &[Point]) -> String {
    let mut out = String::from("model,task,setting,constrained,prompts,outputs,seeds,distinct_outputs,cut,cut_by_cap,bad_json,schema_violation");
    for m in Metric::all() {
        let c = m.column();
        let _ = write!(out, ",{c},{c}_lo,{c}_hi");
    }
    out += "\n";
    for p in points {
        let k = &p.key;
        let _ = write!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            field(&k.model),
            field(&k.task),
            field(&k.setting),
            k.constrained,
            p.prompts,
            p.outputs,
            p.seeds,
            p.distinct_outputs,
            p.cut,
            p.failures[0],
            p.failures[1],
            p.failures[2]
        );
        for e in &p.values {
            match e {
                Some(e) => {
                    let _ = write!(out, ",{},{},{}", e.value, e.lo, e.hi);
                }
                None => out += ",,,",
            }
        }
        out += "\n";
    }
    out
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.into()
    }
}

/// A file-name stem: lowercase `[a-z0-9-]`, runs of anything else as one `-`.
pub fn slug(s: &str) -> String {
    let mapped: String =
        s.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).collect();
    let slug = mapped.split('-').filter(|p| !p.is_empty()).collect::<Vec<_>>().join("-");
    Some(slug).filter(|s| !s.is_empty()).unwrap_or_else(|| "x".into())
}
