//! What the report concludes, derived from the measured points only: what each sweep
//! shows ([`sweep_findings`]), each task's frontier ([`frontier_table`]) and a
//! recommendation per task and model with its evidence ([`conclusions`]).
//!
//! Every comparison uses [`Estimate::differs`]: two values differ only when their 95 %
//! intervals do not overlap; otherwise the text says the data show no difference.
//!
//! **The rules.**
//!
//! - *Free text* (per model): the reference is greedy decoding (`T 0`). A candidate is a
//!   setting whose diversity (words) is higher than greedy's (a difference) and whose
//!   coherence is not lower than greedy's (no difference, or higher). Among candidates the
//!   recommendation is the one the other model finds most fluent (lowest perplexity). When
//!   no setting keeps greedy's coherence, the most coherent of the more diverse ones is
//!   named, and the text says so.
//! - *Schema tasks* (per model): the constrained setting with the highest valid rate, then
//!   (among those whose valid rate does not differ from the best) the highest correct
//!   rate, then deterministic before sampled, then the fewest cuts; its free run is the
//!   comparison.

use std::fmt::Write as _;

use crate::chart::{frontier, label, Dot};
use crate::points::{Metric, Point, Unit};
use crate::report::{cell, variants, Points};
use crate::stats::Estimate;
use crate::study::{Setting, Sweep, Task};

const GREEDY: &str = "T 0";

/// "a difference" or "no difference the intervals support".
fn verdict(a: Option<Estimate>, b: Option<Estimate>) -> &'static str {
    match (a, b) {
        (Some(a), Some(b)) if a.differs(&b) => "a difference",
        (Some(_), Some(_)) => "no difference the intervals support",
        _ => "not measured at both ends",
    }
}

/// What one sweep shows, per task and model: each key metric at the sweep's first and last
/// value, and whether they differ.
pub fn sweep_findings(index: &Points, sweep: &Sweep, tasks: &[&Task]) -> String {
    let (Some(first), Some(last)) = (sweep.points().next(), sweep.points().last()) else { return String::new() };
    let mut md = String::new();
    for task in tasks {
        let metrics: &[Metric] = if task.schema.is_some() {
            &[Metric::Valid, Metric::Correct, Metric::Cut]
        } else {
            &[Metric::Diversity(Unit::Words), Metric::Diversity(Unit::Tokens), Metric::Perplexity, Metric::Coherence]
        };
        for model in &index.study.models {
            for c in variants(task) {
                let run = if task.schema.is_none() {
                    String::new()
                } else if c {
                    " (constrained)".into()
                } else {
                    " (free)".into()
                };
                let parts: Vec<String> = metrics
                    .iter()
                    .filter_map(|&m| {
                        let a = index.metric(&model.name, &task.name, &first.1.label(), c, m);
                        let b = index.metric(&model.name, &task.name, &last.1.label(), c, m);
                        (a.is_some() || b.is_some())
                            .then(|| format!("{} {} → {} ({})", m.name(), cell(a, m), cell(b, m), verdict(a, b)))
                    })
                    .collect();
                if !parts.is_empty() {
                    let _ = writeln!(
                        md,
                        "- **{}**, {}{run}, {} {} → {}: {}.",
                        task.name,
                        model.name,
                        sweep.parameter.axis(),
                        first.0,
                        last.0,
                        parts.join("; ")
                    );
                }
            }
        }
    }
    md + "\n"
}

/// A free-text task's frontier settings per model: diversity against perplexity, and
/// against coherence.
pub fn frontier_table(index: &Points, task: &Task) -> String {
    let mut md =
        String::from("| model | quality | frontier settings (diversity, quality), by diversity |\n|---|---|---|\n");
    let settings = index.study.settings_of(&task.name);
    for model in &index.study.models {
        for (metric, higher) in [(Metric::Perplexity, false), (Metric::Coherence, true)] {
            let pts: Vec<Dot> = settings
                .iter()
                .filter_map(|s| {
                    let l = s.label();
                    let x = index.metric(&model.name, &task.name, &l, false, Metric::Diversity(Unit::Words))?;
                    let y = index.metric(&model.name, &task.name, &l, false, metric)?;
                    Some((x.value, y.value, l))
                })
                .collect();
            let refs: Vec<&Dot> = pts.iter().collect();
            let front: Vec<String> = frontier(&refs, (true, higher))
                .into_iter()
                .map(|i| format!("{} ({}, {})", pts[i].2, label(pts[i].0), label(pts[i].1)))
                .collect();
            let _ = writeln!(md, "| {} | {} | {} |", model.name, metric.name(), front.join("; "));
        }
    }
    md + "\n"
}

/// The Conclusions section: per task, a recommendation per model with its evidence, and
/// where each quantity is best.
pub fn conclusions(index: &Points) -> String {
    let mut md = String::new();
    for task in &index.study.tasks {
        let _ = writeln!(md, "### {}\n", task.name);
        if !task.description.is_empty() {
            let _ = writeln!(md, "{}\n", task.description.trim());
        }
        for model in &index.study.models {
            let line = if task.schema.is_some() {
                schema_choice(index, task, &model.name)
            } else {
                text_choice(index, task, &model.name)
            };
            let _ = writeln!(md, "- **{}**: {line}", model.name);
        }
        if task.schema.is_none() {
            md += &extremes(index, task);
        }
        md += "\n";
    }
    md
}

/// The settings of `task` with `model`'s point (free runs), in study order.
fn points_of<'a>(index: &'a Points, task: &Task, model: &str, constrained: bool) -> Vec<(Setting, &'a Point)> {
    index
        .study
        .settings_of(&task.name)
        .into_iter()
        .filter_map(|s| index.get(model, &task.name, &s.label(), constrained).map(|p| (s, p)))
        .collect()
}

fn text_choice(index: &Points, task: &Task, model: &str) -> String {
    let points = points_of(index, task, model, false);
    let div = Metric::Diversity(Unit::Words);
    let get = |p: &Point, m| p.get(m);
    let Some((_, greedy)) = points.iter().find(|(s, _)| s.label() == GREEDY) else {
        return "no greedy run to compare with; no recommendation.".into();
    };
    let (gd, gc) = (get(greedy, div), get(greedy, Metric::Coherence));
    let more_diverse: Vec<(Setting, &Point)> = points
        .iter()
        .copied()
        .filter(|(_, p)| match (get(p, div), gd) {
            (Some(d), Some(g)) => d.differs(&g) && d.value > g.value,
            _ => false,
        })
        .collect();
    let keeps_coherence = |p: &Point| match (get(p, Metric::Coherence), gc) {
        (Some(c), Some(g)) => !(c.differs(&g) && c.value < g.value),
        _ => false,
    };
    let candidates: Vec<(Setting, &Point)> = more_diverse.iter().copied().filter(|(_, p)| keeps_coherence(p)).collect();
    let evidence = |p: &Point| {
        format!(
            "diversity (words) {} against greedy's {}, diversity (tokens) {} against {}, coherence {} against {}, perplexity {} against {}",
            cell(get(p, div), div),
            cell(gd, div),
            cell(get(p, Metric::Diversity(Unit::Tokens)), div),
            cell(get(greedy, Metric::Diversity(Unit::Tokens)), div),
            cell(get(p, Metric::Coherence), Metric::Coherence),
            cell(gc, Metric::Coherence),
            cell(get(p, Metric::Perplexity), Metric::Perplexity),
            cell(get(greedy, Metric::Perplexity), Metric::Perplexity),
        )
    };
    if let Some((setting, p)) = best_by(&candidates, Metric::Perplexity, false) {
        let best = p.get(Metric::Perplexity);
        let tied: Vec<String> = candidates
            .iter()
            .filter(|(s, q)| {
                *s != setting && matches!((q.get(Metric::Perplexity), best), (Some(a), Some(b)) if !a.differs(&b))
            })
            .map(|(s, _)| format!("`{}`", s.label()))
            .collect();
        let ties = if tied.is_empty() {
            String::new()
        } else {
            format!(" Its perplexity does not differ from that of {} (also candidates).", tied.join(", "))
        };
        return format!(
            "use `{}`: of the {} settings more diverse than greedy decoding, {} keep its coherence, and this one reads \
             as the most fluent to the other model: {}.{ties}",
            setting.label(),
            more_diverse.len(),
            candidates.len(),
            evidence(p),
        );
    }
    if let Some((setting, p)) = best_by(&more_diverse, Metric::Coherence, true) {
        return format!(
            "no setting more diverse than greedy decoding keeps its coherence; the most coherent of the {} more diverse \
             ones is `{}`: {}.",
            more_diverse.len(),
            setting.label(),
            evidence(p)
        );
    }
    format!(
        "no setting is more diverse than greedy decoding by the intervals, so greedy decoding stands: diversity (words) \
         {}, diversity (tokens) {}, coherence {}, perplexity {}.",
        cell(gd, div),
        cell(get(greedy, Metric::Diversity(Unit::Tokens)), div),
        cell(gc, Metric::Coherence),
        cell(get(greedy, Metric::Perplexity), Metric::Perplexity),
    )
}

/// The first of the points with the highest (`higher`) or lowest value of `metric`.
fn best_by<'a>(points: &[(Setting, &'a Point)], metric: Metric, higher: bool) -> Option<(Setting, &'a Point)> {
    let value = |p: &Point| p.get(metric).map_or(f64::NAN, |e| e.value);
    points.iter().copied().filter(|(_, p)| !value(p).is_nan()).min_by(|a, b| {
        if higher {
            value(b.1).total_cmp(&value(a.1))
        } else {
            value(a.1).total_cmp(&value(b.1))
        }
    })
}

/// Where each quantity is best on a free-text task, per model.
fn extremes(index: &Points, task: &Task) -> String {
    let mut md = String::new();
    for model in &index.study.models {
        let points = points_of(index, task, &model.name, false);
        let best = |m: Metric, higher: bool| {
            points
                .iter()
                .filter_map(|(s, p)| p.get(m).map(|e| (s, e)))
                .min_by(|a, b| if higher { b.1.value.total_cmp(&a.1.value) } else { a.1.value.total_cmp(&b.1.value) })
                .map_or("—".into(), |(s, e)| format!("`{}` ({})", s.label(), cell(Some(e), m)))
        };
        let _ = writeln!(
            md,
            "- {}, for reference: most diverse (words) {}; most coherent {}; lowest perplexity {}.",
            model.name,
            best(Metric::Diversity(Unit::Words), true),
            best(Metric::Coherence, true),
            best(Metric::Perplexity, false)
        );
    }
    md
}

fn schema_choice(index: &Points, task: &Task, model: &str) -> String {
    let points = points_of(index, task, model, true);
    let value = |p: &Point, m: Metric| p.get(m).map_or(f64::NEG_INFINITY, |e| e.value);
    let Some((_, top)) = points.iter().max_by(|a, b| value(a.1, Metric::Valid).total_cmp(&value(b.1, Metric::Valid)))
    else {
        return "no constrained run; no recommendation.".into();
    };
    let top_valid = top.get(Metric::Valid);
    let tied = points.iter().filter(|(_, p)| match (p.get(Metric::Valid), top_valid) {
        (Some(a), Some(b)) => !a.differs(&b),
        _ => false,
    });
    let pick = tied.min_by(|a, b| {
        value(b.1, Metric::Correct)
            .total_cmp(&value(a.1, Metric::Correct))
            .then(b.0.is_deterministic().cmp(&a.0.is_deterministic()))
            .then(a.1.cut.cmp(&b.1.cut))
    });
    let Some((setting, p)) = pick else { return "no valid rate measured; no recommendation.".into() };
    let label = setting.label();
    let free = index.get(model, &task.name, &label, false);
    let mut line = format!(
        "use `{label}` with the schema: valid {}, correct {}, {} of {} outputs cut by the token cap",
        cell(p.get(Metric::Valid), Metric::Valid),
        cell(p.get(Metric::Correct), Metric::Correct),
        p.cut,
        p.outputs
    );
    if let Some(f) = free {
        let (valid, correct) =
            (cell(f.get(Metric::Valid), Metric::Valid), cell(f.get(Metric::Correct), Metric::Correct));
        let verdict = verdict(p.get(Metric::Valid), f.get(Metric::Valid));
        let [cut, bad, schema] = f.failures;
        let _ = write!(
            line,
            "; without the schema the same setting gives valid {valid}, correct {correct} — on validity {verdict}; of \
             its {} outputs, {cut} were cut by the token cap, {bad} were bad JSON and {schema} violated the schema",
            f.outputs
        );
    }
    if label != GREEDY {
        if let Some(g) = index.get(model, &task.name, GREEDY, true) {
            let _ = write!(
                line,
                ". Greedy with the schema: valid {}, correct {}, {} cut",
                cell(g.get(Metric::Valid), Metric::Valid),
                cell(g.get(Metric::Correct), Metric::Correct),
                g.cut
            );
        }
    }
    line + "."
}
