//! `stencil experiment` and contrastive search from the command line, end to end with the
//! real default model (SmolLM2-135M-Instruct; `scripts/fetch-models.sh` fetches it).

mod common;

use common::{fixtures, generate, model, run, scratch, stderr};
use serde_json::Value;

/// A small experiment: one free prompt and one schema prompt (also free), a greedy, a
/// sampled and the contrastive preset, 3 seeds, few tokens.
fn experiment_file() -> std::path::PathBuf {
    let schema = fixtures().join("experiments/risk.schema.json");
    let text = format!(
        r#"
title = "Small"
models = [{{ file = "{model}", name = "SmolLM2" }}]
presets = ["greedy", "hot", "contrastive"]
samples = 3
seed = 7
max_tokens = 24

[preset.greedy]
temperature = 0.0
[preset.hot]
temperature = 1.0

[[prompt]]
id = "bullets"
text = "Write three bullet points about decoding:"

[[prompt]]
id = "risk"
text = "Return a JSON object with keys risk and mitigation."
schema = "{schema}"
free = true
max_tokens = 200
"#,
        model = model().display(),
        schema = schema.display()
    );
    scratch("small.toml", text.as_bytes())
}

#[test]
fn an_experiment_writes_samples_metrics_charts_and_a_report() {
    let out_dir = scratch("out.keep", b"").with_file_name("out");
    let file = experiment_file();
    let out = run(["experiment", file.to_str().unwrap(), "--out", out_dir.to_str().unwrap(), "--threads", "1", "-q"]);
    assert!(out.status.success(), "{}", stderr(&out));

    let samples: Vec<Value> = std::fs::read_to_string(out_dir.join("samples.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // 3 presets × (1 free prompt + a schema prompt run constrained and free) × 3 seeds.
    assert_eq!(samples.len(), 3 * 3 * 3);
    assert!(samples.iter().all(|s| s["model"] == "SmolLM2"), "the file names the model");
    let of = |preset: &str, prompt: &str, constrained: bool| -> Vec<&Value> {
        samples
            .iter()
            .filter(|s| s["preset"] == preset && s["prompt"] == prompt && s["constrained"] == constrained)
            .collect()
    };
    // Greedy and contrastive search are the same for every seed; sampling at T = 1 is not.
    for preset in ["greedy", "contrastive"] {
        let texts: Vec<&Value> = of(preset, "bullets", false).iter().map(|s| &s["text"]).collect();
        assert!(texts.iter().all(|t| *t == texts[0]), "{preset}: {texts:?}");
    }
    let hot: Vec<&Value> = of("hot", "bullets", false).iter().map(|s| &s["text"]).collect();
    assert!(hot.iter().any(|t| *t != hot[0]), "{hot:?}");
    let seeds: Vec<u64> = of("hot", "bullets", false).iter().map(|s| s["seed"].as_u64().unwrap()).collect();
    assert_eq!(seeds, [7, 8, 9]);
    // Under the schema every output validates; records come along.
    for preset in ["greedy", "hot", "contrastive"] {
        for s in of(preset, "risk", true) {
            assert_eq!(s["valid"], true, "{preset}: {}", s["text"]);
        }
    }
    let contrastive = &of("contrastive", "bullets", false)[0]["record"];
    assert_eq!(contrastive["contrastive"]["top_k"], 4, "{contrastive}");
    assert!(contrastive["contrastive"]["candidate_steps"].as_u64().unwrap() > 0);

    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    for link in report.split("](").skip(1).filter_map(|rest| rest.split(')').next()).filter(|l| l.ends_with(".svg")) {
        assert!(out_dir.join(link).is_file(), "the report links {link}");
    }
    assert!(report.contains("Recommendations"), "{report}");
    let csv = std::fs::read_to_string(out_dir.join("metrics.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 3 * 3, "a header and a row per prompt, preset and constraint");

    // The report again from the samples alone: the same files.
    std::fs::remove_file(out_dir.join("report.md")).unwrap();
    let again = run(["experiment", file.to_str().unwrap(), "--out", out_dir.to_str().unwrap(), "--report-only", "-q"]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(std::fs::read_to_string(out_dir.join("report.md")).unwrap(), report);
}

#[test]
fn experiment_file_errors_are_located() {
    let file = scratch(
        "bad.toml",
        b"title = \"x\"\nmodels = []\npresets = [\"nope\"]\n[[prompt]]\nid = \"a\"\ntext = \"b\"\n",
    );
    let out = run(["experiment", file.to_str().unwrap(), "--out", "unused"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("unknown preset `nope`"), "{}", stderr(&out));
    let file = scratch("typo.toml", b"title = \"x\"\nmodel = []\n");
    let out = run(["experiment", file.to_str().unwrap(), "--out", "unused"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("line 2"), "{}", stderr(&out));
}

#[test]
fn penalty_alpha_runs_contrastive_search_and_zero_is_greedy() {
    let prompt = ["--prompt", "Write three bullet points about decoding:", "--max-tokens", "32"];
    let greedy = generate(&prompt);
    assert!(greedy.status.success(), "{}", stderr(&greedy));
    let zero = generate(&[&prompt[..], &["--penalty-alpha", "0", "--top-k", "4"]].concat());
    assert_eq!(zero.stdout, greedy.stdout, "alpha 0 is greedy");
    let cs = generate(&[&prompt[..], &["--contrastive", "0.6", "--top-k", "4"]].concat());
    assert!(cs.status.success(), "{}", stderr(&cs));
    let preset = generate(&[&prompt[..], &["--preset", "contrastive"]].concat());
    assert_eq!(preset.stdout, cs.stdout, "the preset is alpha 0.6, k 4");
    let beams = generate(&[&prompt[..], &["--penalty-alpha", "0.6", "--beams", "2"]].concat());
    assert_eq!(beams.status.code(), Some(2), "{}", stderr(&beams));
}
