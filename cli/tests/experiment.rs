//! `stencil experiment` and contrastive search from the command line, end to end with the
//! real models (SmolLM2-135M-Instruct and Gemma 3 270M; `scripts/fetch-models.sh` fetches
//! them).

mod common;

use common::{fixtures, generate, run, scratch, stderr};
use stencil_experiment::report;
use stencil_experiment::study::Study;
use stencil_experiment::{files, Sample};

/// The shipped study's `--quick` variant, both models: what ran, what was judged and
/// scored, and the report re-rendered from the files alone.
#[test]
fn the_quick_study_decodes_scores_and_reports() {
    let out_dir = scratch("quick.keep", b"").with_file_name("quick");
    let _ = std::fs::remove_dir_all(&out_dir);
    let file = fixtures().join("experiments/decoding.toml");
    let started = std::time::Instant::now();
    let out = run([
        "experiment",
        file.to_str().unwrap(),
        "--quick",
        "--out",
        out_dir.to_str().unwrap(),
        "--threads",
        "1",
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let elapsed = started.elapsed();

    let study = Study::from_toml(&std::fs::read_to_string(&file).unwrap()).unwrap().quick();
    let samples = files::read_samples(&out_dir).unwrap();
    // Every setting of every task, on every prompt and constraint, with its seeds.
    let expected: usize = study
        .tasks
        .iter()
        .map(|t| {
            let seeds: usize = study.settings_of(&t.name).iter().map(|s| study.seeds_for(s)).sum();
            seeds * t.prompts.len() * report::variants(t).len()
        })
        .sum::<usize>()
        * study.models.len();
    assert_eq!(samples.len(), expected);
    // Sampled settings give their seeds different outputs somewhere; the seeds are seed, seed + 1.
    let sampled: Vec<&Sample> = samples.iter().filter(|s| s.setting == "T 1.5" && s.task == "story").collect();
    assert_eq!(sampled.iter().map(|s| s.seed).collect::<Vec<_>>(), [1, 2, 1, 2]);
    assert!(sampled.chunks(2).any(|pair| pair[0].text != pair[1].text), "{sampled:?}");
    for s in &samples {
        // Token caps hold, and an output at the cap is recorded as cut.
        let cap = study.tasks.iter().find(|t| t.name == s.task).unwrap().max_tokens as usize;
        assert!(s.tokens.len() <= cap, "{s:?}");
        if s.stop == "length" {
            assert_eq!(s.tokens.len(), cap);
        }
        // The other model read every non-empty output: its perplexity and a cosine.
        let other = if s.model == study.models[0].name { &study.models[1].name } else { &study.models[0].name };
        assert_eq!(s.scorer.as_ref(), Some(other));
        assert_eq!(s.nll.is_some(), !s.text.is_empty(), "{s:?}");
        assert_eq!(s.coherence.is_some(), !s.text.is_empty(), "{s:?}");
        if let Some(nll) = s.nll {
            assert!(nll.is_finite() && nll > 0.0, "{s:?}");
        }
        if let Some(c) = s.coherence {
            assert!((-1.0..=1.0).contains(&c), "{s:?}");
        }
        // Schema outputs are judged; constrained ones that are not cut are valid.
        assert_eq!(s.valid.is_some(), s.task == "extract");
        if s.constrained && !s.is_cut() {
            assert_eq!(s.valid, Some(true), "{s:?}");
        }
    }
    let run_record = files::read_run(&out_dir).unwrap();
    assert!(run_record.quick && run_record.commit != "unknown");

    // The report from the files alone is the same report.
    let report = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(report.contains("`--quick` variant"), "{report}");
    std::fs::remove_file(out_dir.join("report.md")).unwrap();
    let again = run([
        "experiment",
        file.to_str().unwrap(),
        "--quick",
        "--out",
        out_dir.to_str().unwrap(),
        "--report-only",
        "-q",
    ]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert_eq!(std::fs::read_to_string(out_dir.join("report.md")).unwrap(), report);
    eprintln!("the quick study took {elapsed:?}");
}

#[test]
fn experiment_file_errors_are_located() {
    let file = scratch("bad.toml", b"title = \"x\"\nmodels = []\n[[sweep]]\nname = \"s\"\nparameter = \"top_p\"\nvalues = [2.0]\n[[task]]\nname = \"t\"\nmax_tokens = 4\nprompts = [{ id = \"a\", text = \"b\" }]\n");
    let out = run(["experiment", file.to_str().unwrap(), "--out", "unused"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("sweep `s`: top-p = 2 is out of range"), "{}", stderr(&out));
    let file = scratch("typo.toml", b"title = \"x\"\nmodel = []\n");
    let out = run(["experiment", file.to_str().unwrap(), "--out", "unused"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("line 2"), "{}", stderr(&out));
    let missing = scratch("missing.keep", b"").with_file_name("no-such-run");
    let file = fixtures().join("experiments/decoding.toml");
    let out = run(["experiment", file.to_str().unwrap(), "--out", missing.to_str().unwrap(), "--report-only"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("samples.jsonl.gz"), "{}", stderr(&out));
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
