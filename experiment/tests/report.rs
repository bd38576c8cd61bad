//! The report end to end on a synthetic study: the files, the charts as SVG, the cut
//! accounting, the recommendations drawn from the data, and byte-identical re-rendering.

mod common;

use std::fs;
use std::path::PathBuf;

use common::{check_charts, table_rows};
use stencil_experiment::report::{self, Run};
use stencil_experiment::study::Study;
use stencil_experiment::{files, Sample};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stencil-report-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

const STUDY: &str = r#"
title = "Synthetic <study>"
intro = "Made-up samples."
models = [{ file = "a.gguf", name = "Alpha" }, { file = "b.gguf", name = "Beta" }]
seeds = 4
[[sweep]]
name = "temperature"
parameter = "temperature"
base = { top_p = 1.0, top_k = 0 }
values = [0.0, 0.7, 1.5]
[[sweep]]
name = "rep greedy"
parameter = "repetition_penalty"
base = { temperature = 0.0 }
values = [1.0, 1.3]
tasks = ["story"]
[[task]]
name = "story"
max_tokens = 12
prompts = [{ id = "s1", text = "one" }, { id = "s2", text = "two" }, { id = "s3", text = "three" }, { id = "s4", text = "four" }]
[[task]]
name = "card"
max_tokens = 12
schema = "card.json"
free = true
prompts = [{ id = "c1", text = "card one" }, { id = "c2", text = "card two" }]
"#;

/// Greedy repeats itself, `T 0.7` varies and stays coherent, `T 1.5` varies most but
/// drifts off topic; `T 0 rep 1.3` is as coherent as greedy but only a little more varied.
/// Under the schema every output is valid; free, greedy is cut and sampling is bad JSON.
fn samples(study: &Study) -> Vec<Sample> {
    let mut out = Vec::new();
    for model in ["Alpha", "Beta"] {
        for task in &study.tasks {
            for (pi, prompt) in task.prompts.iter().enumerate() {
                for setting in study.settings_of(&task.name) {
                    let label = setting.label();
                    for constrained in report::variants(task) {
                        for seed in 1..=study.seeds_for(&setting) as u64 {
                            let k = seed as u32 + 10 * pi as u32;
                            let (text, tokens, coherence, nll): (String, Vec<u32>, f64, f64) = match label.as_str() {
                                "T 0" => ("go go go go go go go go".into(), vec![7; 8], 0.9, 0.2),
                                "T 0 rep 1.3" => {
                                    (format!("go on go on go on w{k}"), vec![7, 8, 7, 8, 7, 8, k + 100], 0.9, 0.5)
                                }
                                "T 0.7" => (
                                    format!("a{k} b{k} a{k} b{k} c{k} d{k} e{k}"),
                                    (0..7).map(|i| 200 + 7 * k + i).collect(),
                                    0.9,
                                    1.0,
                                ),
                                _ => (
                                    format!("q{k} r{k} s{k} t{k} u{k} v{k} x{k}"),
                                    (0..7).map(|i| 900 + 7 * k + i).collect(),
                                    0.3 + 0.01 * f64::from(k % 3),
                                    3.0,
                                ),
                            };
                            let mut s = Sample::text(model, &task.name, &prompt.id, &label, seed, &text, &tokens);
                            s.constrained = constrained;
                            // Six decimals, as the CLI stores scores.
                            let round = |v: f64| (v * 1e6).round() / 1e6;
                            s.nll = Some(round(nll + 0.01 * f64::from(k % 5)));
                            s.coherence = Some(round(coherence + 0.001 * f64::from(k % 4)));
                            s.scorer = Some(if model == "Alpha" { "Beta" } else { "Alpha" }.into());
                            if task.schema.is_some() {
                                let greedy = label == "T 0";
                                s.stop = if !constrained && greedy { "length".into() } else { "eos".into() };
                                s.parses = Some(constrained);
                                s.valid = Some(constrained);
                                s.correct = Some(constrained && (greedy || seed % 2 == 1));
                            }
                            out.push(s);
                        }
                    }
                }
            }
        }
    }
    out
}

fn write(name: &str) -> (PathBuf, report::Report, Vec<Sample>, Study) {
    let study = Study::from_toml(STUDY).unwrap();
    let samples = samples(&study);
    let dir = temp_dir(name);
    let run = Run {
        commit: "0123456789ab".into(),
        dirty: true,
        seconds: 90.0,
        decode_seconds: 60.0,
        cpu_seconds: Some(150.0),
        threads: 2,
        quick: false,
    };
    let report = report::write(&dir, &study, &run, &samples).unwrap();
    (dir, report, samples, study)
}

#[test]
fn the_report_links_well_formed_charts_that_draw_their_legends() {
    let (dir, report, samples, _) = write("charts");
    let md = fs::read_to_string(&report.markdown).unwrap();
    let checked = check_charts(&dir, &md);
    // Two sweeps with a free-text task, the schema task under temperature, a quality
    // plane for the free-text task.
    assert_eq!(checked, 4);
    assert_eq!(report.charts.len(), checked);
    assert!(md.starts_with("# Synthetic <study>\n\nMade-up samples.\n"));
    assert!(md.contains("commit `0123456789ab` with uncommitted changes"), "the commit of the code that ran");
    assert!(
        md.contains(&format!("{} outputs in 1.5 minutes (1.0 decoding, 0.5 scoring; 2.5 CPU-minutes)", samples.len()))
    );
    let csv = fs::read_to_string(dir.join("metrics.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + report.points.len());
    let columns = csv.lines().next().unwrap().split(',').count();
    assert!(csv.lines().all(|l| l.split(',').count() == columns), "{csv}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn every_cut_is_counted_and_every_failure_has_its_reason() {
    let (dir, report, samples, _) = write("cuts");
    let md = fs::read_to_string(&report.markdown).unwrap();
    let section = md.split("## Every cut counted").nth(1).unwrap().split("\n## ").next().unwrap();
    let rows = table_rows(section);
    // model | task | run | outputs | cut | cut by the token cap | bad JSON | schema violation | valid
    let free_card: Vec<&Vec<String>> =
        rows.iter().filter(|r| r.len() == 9 && r[1] == "card" && r[2] == "free").collect();
    assert_eq!(free_card.len(), 2);
    for row in free_card {
        let of: Vec<&Sample> =
            samples.iter().filter(|s| s.model == row[0] && s.task == "card" && !s.constrained).collect();
        let cut = of.iter().filter(|s| s.stop == "length").count();
        assert_eq!(row[3], of.len().to_string());
        assert_eq!((row[4].as_str(), row[5].as_str()), (cut.to_string().as_str(), cut.to_string().as_str()));
        assert_eq!(row[6], (of.len() - cut).to_string(), "the rest is bad JSON");
        assert_eq!((row[7].as_str(), row[8].as_str()), ("0", "0"));
    }
    // The sweep tables' cut column agrees, row by row.
    for row in table_rows(&md).iter().filter(|r| r.len() > 5 && r[3] == "free") {
        let count = samples
            .iter()
            .filter(|s| {
                s.model == row[0] && s.setting == row[2] && s.task == "card" && !s.constrained && s.stop == "length"
            })
            .count();
        assert_eq!(row[5], count.to_string(), "{row:?}");
    }
    // Examples that were cut say so.
    let examples = md.split("## Examples").nth(1).unwrap();
    assert!(examples.contains("T 0, free (seed 1; **cut** at 8 tokens)"), "{examples}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn conclusions_follow_the_data() {
    let (dir, report, _, _) = write("conclusions");
    let md = fs::read_to_string(&report.markdown).unwrap();
    let conclusions = md.split("## Conclusions").nth(1).unwrap().split("\n## ").next().unwrap();
    // T 1.5 is the most diverse but loses coherence; T 0.7 and T 0 rep 1.3 are more diverse
    // than greedy and keep its coherence; rep 1.3 reads more fluently (lower perplexity).
    let story: Vec<&str> =
        conclusions.lines().filter(|l| l.starts_with("- **Alpha**") || l.starts_with("- **Beta**")).collect();
    assert!(
        story[0].starts_with(
            "- **Alpha**: use `T 0 rep 1.3`: of the 3 settings more diverse than greedy decoding, 2 keep its coherence"
        ),
        "{conclusions}"
    );
    assert!(conclusions.contains("most diverse (words) `T 1.5`"), "{conclusions}");
    // The schema task: every constrained setting is valid; greedy wins the tie on
    // correctness and determinism, against its free run, which was cut.
    let card = conclusions.split("### card").nth(1).unwrap();
    assert!(card.contains("- **Alpha**: use `T 0` with the schema: valid 100 %"), "{card}");
    assert!(card.contains("without the schema the same setting gives valid 0 %"), "{card}");
    assert!(card.contains("on validity a difference; of its 2 outputs, 2 were cut by the token cap, 0 were bad JSON and 0 violated the schema"), "{card}");
    // The sweep findings call a difference only with disjoint intervals.
    assert!(md.contains("diversity (words) 0 → 1 (a difference)") || md.contains("(a difference)"), "{md}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn the_report_re_renders_byte_for_byte_from_its_files() {
    let study = Study::from_toml(STUDY).unwrap();
    let run = Run {
        commit: "0123456789ab".into(),
        dirty: true,
        seconds: 90.0,
        decode_seconds: 60.0,
        cpu_seconds: None,
        threads: 2,
        quick: false,
    };
    // As the CLI does: write the files, then the report from what was written.
    let (first, second) = (temp_dir("again-1"), temp_dir("again-2"));
    files::write_samples(&first, &samples(&study)).unwrap();
    files::write_run(&first, &run).unwrap();
    let read = files::read_samples(&first).unwrap();
    assert_eq!(read.len(), samples(&study).len());
    assert_eq!(read, samples(&study));
    let a = report::write(&first, &study, &files::read_run(&first).unwrap(), &read).unwrap();
    // Again from the first run's files.
    files::write_samples(&second, &read).unwrap();
    assert_eq!(fs::read(first.join(files::SAMPLES)).unwrap(), fs::read(second.join(files::SAMPLES)).unwrap());
    let b = report::write(&second, &study, &run, &files::read_samples(&second).unwrap()).unwrap();
    for name in
        a.charts.iter().map(|p| p.file_name().unwrap().to_owned()).chain(["report.md".into(), "metrics.csv".into()])
    {
        assert_eq!(fs::read(first.join(&name)).unwrap(), fs::read(second.join(&name)).unwrap(), "{name:?}");
    }
    assert_eq!(a.points, b.points);
    let _ = (fs::remove_dir_all(&first), fs::remove_dir_all(&second));
}

#[test]
fn no_samples_still_make_a_report() {
    let study = Study::from_toml(STUDY).unwrap();
    let dir = temp_dir("empty");
    let run = Run {
        commit: "unknown".into(),
        dirty: false,
        seconds: 0.0,
        decode_seconds: 0.0,
        cpu_seconds: None,
        threads: 1,
        quick: true,
    };
    let report = report::write(&dir, &study, &run, &[]).unwrap();
    let md = fs::read_to_string(&report.markdown).unwrap();
    assert!(md.contains("`--quick` variant") && md.contains("no greedy run to compare with"));
    // Charts of no data still parse, say so, and name no series.
    for chart in &report.charts {
        let svg = fs::read_to_string(chart).unwrap();
        let doc = roxmltree::Document::parse(&svg).unwrap();
        assert!(doc.descendants().all(|n| n.attribute("class") != Some("key")), "{svg}");
        assert!(svg.contains("no data"));
    }
    let _ = fs::remove_dir_all(&dir);
}
