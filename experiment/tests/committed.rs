//! The committed study, `examples/experiment/`: re-rendered from its `samples.jsonl.gz` it
//! is byte for byte the committed report; its tables' counts and rates, recomputed from
//! the samples without the report's code, are what the tables say; every cut output is
//! counted; every chart it links is SVG that draws the series its legend names.
//! (`scripts/experiment.sh` regenerates the study; these tests need no model.)

mod common;

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use common::{check_charts, table_rows};
use stencil_experiment::chart::label;
use stencil_experiment::report;
use stencil_experiment::study::Study;
use stencil_experiment::{files, Sample};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/experiment")
}

fn study() -> Study {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/experiments/decoding.toml");
    Study::from_toml(&fs::read_to_string(path).unwrap()).unwrap()
}

fn committed_report() -> String {
    fs::read_to_string(dir().join("report.md")).expect("examples/experiment/report.md: run scripts/experiment.sh")
}

fn samples() -> Vec<Sample> {
    files::read_samples(&dir()).unwrap_or_else(|e| panic!("{e}: run scripts/experiment.sh"))
}

/// The first line where `a` and `b` differ, for a readable failure.
fn first_difference(a: &str, b: &str) -> String {
    a.lines()
        .zip(b.lines())
        .enumerate()
        .find(|(_, (x, y))| x != y)
        .map_or("one is a prefix of the other".into(), |(i, (x, y))| {
            format!("line {}:\n  committed: {x}\n  rendered:  {y}", i + 1)
        })
}

#[test]
fn the_committed_report_is_what_its_samples_give() {
    let run = files::read_run(&dir()).unwrap();
    assert!(!run.quick, "the committed report is the full study");
    assert!(run.commit.len() >= 7 && run.commit != "unknown", "the report records the commit that ran: {}", run.commit);
    assert!(!run.dirty, "the committed report was decoded by committed code");
    let out = std::env::temp_dir().join(format!("stencil-committed-{}", std::process::id()));
    let _ = fs::remove_dir_all(&out);
    let rendered = report::write(&out, &study(), &run, &samples()).unwrap();
    let (committed, again) = (committed_report(), fs::read_to_string(&rendered.markdown).unwrap());
    assert!(
        committed == again,
        "report.md is not what samples.jsonl.gz gives: {}",
        first_difference(&committed, &again)
    );
    let names = rendered.charts.iter().map(|p| p.file_name().unwrap().to_owned()).chain(["metrics.csv".into()]);
    for name in names {
        assert!(fs::read(dir().join(&name)).unwrap() == fs::read(out.join(&name)).unwrap(), "{name:?} differs");
    }
    let _ = fs::remove_dir_all(&out);
}

#[test]
fn every_committed_chart_is_svg_that_draws_its_legend() {
    let md = committed_report();
    let charts = check_charts(&dir(), &md);
    let study = study();
    // A chart per sweep, the schema task's per sweep it runs in, a quality plane per free-text task.
    let schema_sweeps: usize =
        study.tasks.iter().filter(|t| t.schema.is_some()).map(|t| study.sweeps_of(&t.name).count()).sum();
    let text_tasks = study.tasks.iter().filter(|t| t.schema.is_none()).count();
    assert_eq!(charts, study.sweeps.len() + schema_sweeps + text_tasks);
}

/// The samples of a table row: model, task, setting, constraint.
fn row_samples<'a>(
    samples: &'a [Sample],
    model: &str,
    task: &str,
    setting: &str,
    constrained: bool,
) -> Vec<&'a Sample> {
    samples
        .iter()
        .filter(|s| s.model == model && s.task == task && s.setting == setting && s.constrained == constrained)
        .collect()
}

/// The value part of a cell: `12.5` of `12.5 (10–15)`.
fn value(cell: &str) -> &str {
    cell.split(" (").next().unwrap_or(cell)
}

#[test]
fn every_table_row_is_what_the_samples_give() {
    let (md, samples) = (committed_report(), samples());
    let sweeps = md.split("\n## Sweeps\n").nth(1).unwrap().split("\n## Quality").next().unwrap();
    let mut checked = 0;
    for block in sweeps.split("Task **").skip(1) {
        let task = block.split("**").next().unwrap();
        let rows = table_rows(block.split("\n\n").nth(1).unwrap_or(""));
        let header = &rows[0];
        let col: HashMap<&str, usize> = header.iter().enumerate().map(|(i, h)| (h.as_str(), i)).collect();
        for row in rows.iter().skip(2) {
            let constrained = col.get("schema").is_some_and(|&i| row[i] == "constrained");
            let of = row_samples(&samples, &row[0], task, &row[col["setting"]], constrained);
            assert!(!of.is_empty(), "{task}: no samples for {row:?}");
            assert_eq!(row[col["outputs"]], of.len().to_string(), "{task} {row:?}");
            assert_eq!(row[col["cut"]], of.iter().filter(|s| s.stop == "length").count().to_string(), "{task} {row:?}");
            let length = of.iter().map(|s| s.tokens.len() as f64).sum::<f64>() / of.len() as f64;
            assert_eq!(value(&row[col["length (tokens)"]]), label(length), "{task} {row:?}");
            if let Some(&v) = col.get("valid") {
                let valid = of.iter().filter(|s| s.valid == Some(true)).count() as f64 / of.len() as f64;
                assert_eq!(value(&row[v]), format!("{} %", label(100.0 * valid)), "{task} {row:?}");
            }
            if let Some(&c) = col.get("coherence") {
                let scored: Vec<f64> = of.iter().filter_map(|s| s.coherence).collect();
                let mean = scored.iter().sum::<f64>() / scored.len() as f64;
                assert_eq!(value(&row[c]), label(mean), "{task} {row:?}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 100, "only {checked} rows checked");
}

#[test]
fn every_cut_output_is_counted_and_every_cut_example_says_so() {
    let (md, samples) = (committed_report(), samples());
    let section = md.split("## Every cut counted").nth(1).unwrap().split("\n## ").next().unwrap();
    let rows: Vec<Vec<String>> = table_rows(section).into_iter().skip(2).collect();
    let total: usize = rows.iter().map(|r| r[4].parse::<usize>().unwrap()).sum();
    assert_eq!(total, samples.iter().filter(|s| s.is_cut()).count(), "every cut output is in the table");
    assert_eq!(rows.iter().map(|r| r[3].parse::<usize>().unwrap()).sum::<usize>(), samples.len());
    for row in rows.iter().filter(|r| r[2] == "free" || r[2] == "constrained") {
        let of: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.model == row[0] && s.task == row[1] && s.constrained == (row[2] == "constrained"))
            .collect();
        let invalid: usize = row[5..8].iter().map(|c| c.parse::<usize>().unwrap()).sum();
        assert_eq!(
            invalid + row[8].parse::<usize>().unwrap(),
            of.len(),
            "every output is valid or has a reason: {row:?}"
        );
    }
    let examples = md.split("## Examples").nth(1).unwrap();
    let (mut at, mut shown) = (("", ""), 0);
    for line in examples.lines() {
        if let Some(heading) = line.strip_prefix("### ") {
            let (task, prompt) = heading.split_once(": `").unwrap();
            at = (task, prompt.trim_end_matches('`'));
        } else if line.starts_with("**") && line.contains(" (seed ") {
            let (model, rest) = line[2..].split_once("**, ").unwrap();
            let (what, seed) = rest.split_once(" (seed ").unwrap();
            let seed: u64 = seed.split(';').next().unwrap().parse().unwrap();
            let (setting, constrained) = match what.rsplit_once(", ") {
                Some((s, "constrained")) => (s, true),
                Some((s, "free")) => (s, false),
                _ => (what, false),
            };
            let s = samples
                .iter()
                .find(|s| {
                    s.model == model
                        && s.task == at.0
                        && s.prompt == at.1
                        && s.setting == setting
                        && s.constrained == constrained
                        && s.seed == seed
                })
                .unwrap_or_else(|| panic!("no sample for {line}"));
            assert_eq!(line.contains(&format!("**cut** at {} tokens", s.tokens.len())), s.is_cut(), "{line}");
            shown += 1;
        }
    }
    assert!(shown >= 6, "{shown} examples");
}
