//! The report end to end on a synthetic experiment, the charts on awkward input, and
//! `recommend` on hand-built tables.

use std::fs;
use std::path::{Path, PathBuf};

use stencil_experiment::chart::{BarChart, Distribution};
use stencil_experiment::metrics::Metrics;
use stencil_experiment::report::{self, recommend};
use stencil_experiment::{Group, Sample};

/// A fresh directory under the system's temp dir, unique to this process and `name`.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stencil-report-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

/// 2 models × (a free-text prompt, a schema prompt run constrained and free) × 3 presets ×
/// 3 seeds; `greedy` gives the same text for every seed.
fn samples() -> Vec<Sample> {
    let mut out = Vec::new();
    for model in ["SmolLM2", "Qwen2.5 0.5B"] {
        for preset in ["greedy", "nucleus", "anti-repeat"] {
            for seed in 1..=3u64 {
                let varied = if preset == "greedy" { 0 } else { seed };
                let text = match preset {
                    "greedy" => "the cat sat on the mat the cat sat on the mat the cat sat".to_string(),
                    _ => format!(
                        "a {model} story {varied} with ```fences``` and words {preset} {}",
                        "x ".repeat(seed as usize)
                    ),
                };
                out.push(Sample::free_text(model, "story", preset, seed, &text, 10 + 5 * varied as usize));
                for constrained in [true, false] {
                    let valid = constrained || (preset == "greedy" && seed == 1);
                    out.push(Sample {
                        constrained,
                        parses: Some(valid || seed == 2),
                        valid: Some(valid),
                        ..Sample::free_text(
                            model,
                            "Person card!",
                            preset,
                            seed,
                            &format!("{{\"name\": \"{varied}\"}}"),
                            8,
                        )
                    });
                }
            }
        }
    }
    out
}

#[test]
fn write_produces_linked_well_formed_files() {
    let dir = temp_dir("write");
    let report = report::write(&dir, "Presets <compared>", "Synthetic samples.", &samples()).unwrap();
    let md = fs::read_to_string(&report.markdown).unwrap();
    for name in ["metrics.csv", "metrics.md", "report.md"] {
        assert!(dir.join(name).is_file(), "{name} missing");
    }
    // 2 models × 3 presets × (story, constrained card, free card).
    assert_eq!(report.table.len(), 18);
    let links: Vec<&str> = md.split("](").skip(1).filter_map(|s| s.split(')').next()).collect();
    assert_eq!(links.len(), report.charts.len());
    for link in &links {
        assert!(link.ends_with(".svg") && dir.join(link).is_file(), "broken link {link}");
        assert!(link
            .trim_end_matches(".svg")
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
    }
    assert!(links.contains(&"valid-person-card.svg") && links.contains(&"rep-story.svg"), "{links:?}");
    let csv = fs::read_to_string(dir.join("metrics.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("model,prompt,preset,constrained,samples,distinct_outputs,rep-2"));
    assert_eq!(lines.len(), 1 + report.table.len());
    assert!(lines.iter().all(|l| l.split(',').count() == 21), "{csv}");
    for chart in &report.charts {
        let svg = fs::read_to_string(chart).unwrap();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>") && !svg.contains("inf"), "{}", chart.display());
        assert_eq!(svg.matches("<g>").count() + svg.matches("<g ").count(), svg.matches("</g>").count());
    }
    for file in fs::read_dir(&dir).unwrap() {
        let text = fs::read_to_string(file.unwrap().path()).unwrap();
        assert!(!text.contains("NaN"), "{text}");
    }
    assert!(md.starts_with("# Presets <compared>\n\nSynthetic samples.\n"));
    assert!(md.contains("`greedy`: identical across 3 seeds on every prompt"), "{md}");
    assert!(md.contains("`nucleus`: 3 different outputs of 3"), "{md}");
    assert!(md.contains("````text\na SmolLM2 story 1 with ```fences```"), "the fence must outlast the text's");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn write_is_reproducible() {
    let (a, b) = (temp_dir("again-a"), temp_dir("again-b"));
    let (ra, rb) = (report::write(&a, "t", "i", &samples()).unwrap(), report::write(&b, "t", "i", &samples()).unwrap());
    let names = |r: &report::Report| r.charts.iter().map(|p| p.file_name().unwrap().to_owned()).collect::<Vec<_>>();
    assert_eq!(names(&ra), names(&rb));
    for name in names(&ra).into_iter().chain(["report.md".into(), "metrics.csv".into(), "metrics.md".into()]) {
        assert_eq!(fs::read(a.join(&name)).unwrap(), fs::read(b.join(&name)).unwrap());
    }
    let _ = (fs::remove_dir_all(&a), fs::remove_dir_all(&b));
}

#[test]
fn write_recommends_from_the_samples() {
    let dir = temp_dir("recommend");
    let report = report::write(&dir, "t", "i", &samples()).unwrap();
    let lines = recommend(&report.table);
    assert!(lines[0].starts_with("For a deterministic extractor use `greedy` with the schema: 100 %"), "{lines:?}");
    assert!(lines[0].contains("against 33 % without it"), "{lines:?}");
    assert!(lines[1].starts_with("For a brainstorming assistant use `"), "{lines:?}");
    assert!(!lines[1].starts_with("For a brainstorming assistant use `greedy`"), "{lines:?}");
    let md = fs::read_to_string(&report.markdown).unwrap();
    assert!(lines.iter().all(|l| md.contains(l.as_str())));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn write_survives_no_samples() {
    let dir = temp_dir("empty");
    let report = report::write(&dir, "t", "i", &[]).unwrap();
    assert!(report.table.is_empty() && report.charts.is_empty());
    assert_eq!(fs::read_to_string(dir.join("metrics.csv")).unwrap().lines().count(), 1);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn charts_survive_awkward_values() {
    let bars = BarChart {
        title: "a & b".into(),
        y_label: "<y>".into(),
        categories: vec!["one".into(), "two".into(), "a very long category name indeed".into()],
        series: vec![("s".into(), vec![f64::NAN, -3.0, 0.0]), ("t".into(), vec![f64::INFINITY]), ("u".into(), vec![])],
        y_max: Some(f64::NAN),
    };
    let empty = BarChart { categories: vec![], series: vec![], ..bars.clone() };
    let all_nan = BarChart { series: vec![("s".into(), vec![f64::NAN; 3])], ..bars.clone() };
    let dist = |groups| Distribution { title: "d".into(), x_label: "x".into(), groups };
    let svgs = [
        bars.to_svg(),
        empty.to_svg(),
        all_nan.to_svg(),
        dist(vec![]).to_svg(),
        dist(vec![("nan".into(), vec![f64::NAN]), ("one".into(), vec![5.0]), ("neg".into(), vec![-2.0, 0.0, 9.0])])
            .to_svg(),
        dist(vec![("zeros".into(), vec![0.0; 4])]).to_svg(),
    ];
    for svg in &svgs {
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        assert_eq!(svg.matches("<g>").count() + svg.matches("<g ").count(), svg.matches("</g>").count());
    }
    assert!(svgs[0].contains("a &amp; b") && svgs[0].contains("&lt;y&gt;") && svgs[0].contains(">n/a<"));
    assert!(svgs[0].contains(">-3<") && svgs[1].contains("no data") && svgs[3].contains("no data"));
}

// recommend() on hand-built tables.

fn row(model: &str, prompt: &str, preset: &str, constrained: bool, m: Metrics) -> (Group, Metrics) {
    (Group { model: model.into(), prompt: prompt.into(), preset: preset.into(), constrained }, m)
}

/// Metrics of 4 seeds with `distinct` different outputs.
fn metrics(distinct: usize, rep4: f64, diversity: f64, valid: Option<f64>) -> Metrics {
    Metrics {
        samples: 4,
        distinct_outputs: distinct,
        rep: [rep4 * 2.0, rep4 * 1.5, rep4],
        diversity,
        seq_rep: [0.1; 3],
        distinct: [0.5; 3],
        self_bleu: Some(0.5),
        length_mean: 20.0,
        length_std: 2.0,
        parse_rate: valid,
        valid_rate: valid,
    }
}

/// Free-text rows (`story`) and schema rows (`card`, constrained and free) per preset:
/// (preset, distinct outputs, rep-4, diversity, constrained valid, free valid).
fn table(models: &[&str], presets: &[(&str, usize, f64, f64, f64, f64)]) -> Vec<(Group, Metrics)> {
    let mut t = Vec::new();
    for model in models {
        for &(p, distinct, rep4, diversity, valid, free) in presets {
            t.push(row(model, "story", p, false, metrics(distinct, rep4, diversity, None)));
            t.push(row(model, "card", p, true, metrics(distinct, 0.0, 1.0, Some(valid))));
            t.push(row(model, "card", p, false, metrics(distinct, 0.0, 1.0, Some(free))));
        }
    }
    t
}

/// Every backticked name in `lines` is a preset of `table`.
fn names_only_presets(lines: &[String], table: &[(Group, Metrics)]) {
    for line in lines {
        for name in line.split('`').skip(1).step_by(2) {
            assert!(table.iter().any(|(g, _)| g.preset == name), "{name} is not a preset: {line}");
        }
    }
}

#[test]
fn recommend_picks_from_the_table() {
    let t = table(
        &["SmolLM2", "Qwen"],
        &[
            ("beam", 1, 30.0, 0.3, 0.9, 0.2),
            ("greedy", 1, 20.0, 0.4, 1.0, 0.25),
            ("wild", 4, 25.0, 0.95, 0.5, 0.1),
            ("nucleus", 4, 5.0, 0.8, 0.75, 0.2),
            ("typical", 3, 8.0, 0.7, 0.75, 0.2),
        ],
    );
    let lines = recommend(&t);
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("For a deterministic extractor use `greedy` with the schema: 100 %"), "{lines:?}");
    assert!(lines[0].contains("against 25 % without it (SmolLM2: 100 % vs 25 %; Qwen: 100 % vs 25 %)"), "{lines:?}");
    // `wild` is more diverse but repeats more than `greedy`.
    assert!(lines[1].starts_with("For a brainstorming assistant use `nucleus`"), "{lines:?}");
    assert!(
        lines[1].contains("diversity 0.8 and rep-4 5 %")
            && lines[1].contains("rep-4 20 % for the deterministic `greedy`")
    );
    names_only_presets(&lines, &t);
}

#[test]
fn recommend_breaks_ties_on_rep4() {
    let t = table(&["SmolLM2"], &[("beam", 1, 30.0, 0.3, 1.0, 0.5), ("greedy", 1, 20.0, 0.4, 1.0, 0.25)]);
    let lines = recommend(&t);
    assert!(lines[0].contains("use `greedy` with the schema: 100 % of its outputs validated with the schema against 25 % without it (SmolLM2)."), "{lines:?}");
    assert!(lines[1].starts_with("No preset gave different outputs"), "{lines:?}");
    names_only_presets(&lines, &t);
}

#[test]
fn recommend_says_when_no_preset_is_less_repetitive() {
    let t = table(
        &["SmolLM2"],
        &[("greedy", 1, 5.0, 0.9, 1.0, 0.5), ("nucleus", 4, 6.0, 0.95, 0.9, 0.4), ("hot", 4, 9.0, 0.99, 0.2, 0.1)],
    );
    let lines = recommend(&t);
    assert!(lines[1].starts_with("For a brainstorming assistant use `hot`, the most diverse"), "{lines:?}");
    assert!(lines[1].contains("though no preset that varies across seeds kept rep-4 at or below"), "{lines:?}");
    names_only_presets(&lines, &t);
}

#[test]
fn recommend_without_schema_prompts() {
    let t: Vec<_> = table(&["SmolLM2"], &[("greedy", 1, 5.0, 0.9, 1.0, 0.5), ("nucleus", 4, 4.0, 0.95, 0.9, 0.4)])
        .into_iter()
        .filter(|(g, _)| g.prompt == "story")
        .collect();
    let lines = recommend(&t);
    assert!(lines[0].starts_with("For a deterministic extractor use `greedy`: identical outputs"), "{lines:?}");
    assert!(lines[0].contains("validity under a schema was not measured"), "{lines:?}");
    assert!(lines[1].starts_with("For a brainstorming assistant use `nucleus`"), "{lines:?}");
    names_only_presets(&lines, &t);
}

#[test]
fn recommend_without_deterministic_presets_or_free_text() {
    let t = table(&["SmolLM2"], &[("nucleus", 4, 4.0, 0.95, 0.9, 0.4), ("hot", 2, 9.0, 0.99, 0.2, 0.1)]);
    let lines = recommend(&t);
    assert!(lines[0].starts_with("No preset gave identical outputs"), "{lines:?}");
    assert!(
        lines[1].starts_with("For a brainstorming assistant use `hot`") && lines[1].contains("no deterministic preset")
    );
    names_only_presets(&lines, &t);
    let schema_only: Vec<_> = t.into_iter().filter(|(g, _)| g.prompt == "card").collect();
    assert!(recommend(&schema_only)[1].starts_with("No free-text prompt was run"));
    assert_eq!(recommend(&[]).len(), 2);
}

#[test]
fn recommend_ignores_single_seed_presets() {
    let mut t = table(&["SmolLM2"], &[("greedy", 1, 5.0, 0.9, 1.0, 0.5)]);
    t.iter_mut().for_each(|(_, m)| m.samples = 1);
    let lines = recommend(&t);
    assert!(lines[0].starts_with("No preset gave identical outputs"), "{lines:?}");
    assert!(lines[1].starts_with("No preset gave different outputs"), "{lines:?}");
}

#[test]
fn report_paths_are_inside_the_directory() {
    let dir = temp_dir("paths");
    let report = report::write(&dir, "t", "i", &samples()).unwrap();
    assert!(report.charts.iter().chain([&report.markdown]).all(|p| p.starts_with(&dir)));
    assert!(Path::new(&report.markdown).ends_with("report.md"));
    let _ = fs::remove_dir_all(&dir);
}
