//! The study file: sweeps expand to settings, settings that decode alike are one, the
//! shipped study has the grid the issue asks for, and bad files fail with located errors.

use stencil_experiment::study::{Parameter, Setting, Study, StudyError};

const TASKS: &str = r#"
[[task]]
name = "story"
max_tokens = 16
prompts = [{ id = "s1", text = "a" }, { id = "s2", text = "b" }, { id = "s3", text = "c" }]
[[task]]
name = "json"
max_tokens = 16
schema = "x.json"
free = true
prompts = [{ id = "j1", text = "a", expected = { name = "A", age = 3 } }]
"#;

fn study(sweeps: &str) -> Result<Study, StudyError> {
    Study::from_toml(&format!("title = \"t\"\nmodels = [{{ file = \"a.gguf\", name = \"A\" }}]\n{sweeps}\n{TASKS}"))
}

#[test]
fn sweeps_expand_to_distinct_settings() {
    let s = study(
        r#"
        [[sweep]]
        name = "T"
        parameter = "temperature"
        base = { top_p = 1.0, top_k = 0 }
        values = [0.0, 0.5, 1.0]
        [[sweep]]
        name = "rep greedy"
        parameter = "repetition_penalty"
        base = { temperature = 0.0 }
        values = [1.0, 1.2]
        tasks = ["story"]
        [[sweep]]
        name = "alpha"
        parameter = "penalty_alpha"
        base = { temperature = 0.0, top_k = 4 }
        values = [0.0, 0.6]
        tasks = ["story"]
        [[sweep]]
        name = "k"
        parameter = "top_k"
        base = { temperature = 0.0, penalty_alpha = 0.6 }
        values = [1, 4, 8]
        tasks = ["story"]
        [[sweep]]
        name = "top-k"
        parameter = "top_k"
        values = [5, 0]
        tasks = ["story"]
    "#,
    )
    .unwrap();
    let labels = |v: Vec<Setting>| v.iter().map(Setting::label).collect::<Vec<_>>();
    // Greedy is T 0, rep 1.0 at T 0, α 0 and k 1; α 0.6 k 4 is one setting in two sweeps;
    // top-k 0 at T 1 is T 1.
    assert_eq!(labels(s.settings()), ["T 0", "T 0.5", "T 1", "T 0 rep 1.2", "α 0.6 k 4", "α 0.6 k 8", "T 1 top-k 5"]);
    assert_eq!(labels(s.settings_of("json")), ["T 0", "T 0.5", "T 1"]);
    let det: Vec<usize> = s.settings().iter().map(|x| s.seeds_for(x)).collect();
    assert_eq!(det, [1, 8, 8, 1, 1, 1, 8]);
    assert_eq!(s.sweeps_of("json").map(|w| w.name.as_str()).collect::<Vec<_>>(), ["T"]);
    assert_eq!(s.task_of("j1").map(|t| t.name.as_str()), Some("json"));
    assert_eq!(s.tasks[1].prompts[0].expected.as_ref().unwrap()["age"], 3);
    // The quick variant: first and last value, one prompt, two seeds, few tokens.
    let q = s.quick();
    assert_eq!(q.sweeps[0].values, [0.0, 1.0]);
    assert_eq!((q.tasks[0].prompts.len(), q.seeds, q.tasks[0].max_tokens), (1, 2, 8));
}

#[test]
fn canonical_settings_keep_what_changes_decoding() {
    let d = Setting::default();
    assert_eq!(d.label(), "T 1");
    assert!(!d.is_deterministic());
    let greedy = Setting { temperature: 0.0, top_p: 0.5, min_p: 0.1, top_k: 7, ..d };
    assert_eq!(greedy.canonical(), Setting { temperature: 0.0, ..d });
    let cs = Setting { penalty_alpha: 0.6, top_k: 4, temperature: 0.9, top_p: 0.8, repetition_penalty: 1.2, ..d };
    assert!(cs.is_contrastive() && cs.is_deterministic());
    assert_eq!(cs.label(), "α 0.6 k 4 rep 1.2");
    // α without candidates is not contrastive search: sampling drops it.
    assert_eq!(Setting { penalty_alpha: 0.6, top_k: 1, ..d }.label(), "T 1 top-k 1");
    assert_eq!(Setting { no_repeat_ngram_size: 3, temperature: 0.8, ..d }.label(), "T 0.8 no-repeat 3");
    assert_eq!(d.with(Parameter::TopK, 20.4).top_k, 20);
    assert_eq!(d.with(Parameter::MinP, 0.05).get(Parameter::MinP), 0.05);
}

#[test]
fn the_shipped_study_has_the_grid_the_issue_asks_for() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/experiments/decoding.toml")).unwrap();
    let s = Study::from_toml(&text).unwrap();
    assert_eq!(s.models.len(), 2);
    assert_eq!(s.seeds, 8);
    assert!(s.tasks.iter().all(|t| t.prompts.len() >= 8), "at least 8 prompts per task");
    assert!(s.tasks.iter().any(|t| t.schema.is_some() && t.free), "a schema task, free and constrained");
    assert!(s.tasks.iter().filter(|t| t.schema.is_some()).flat_map(|t| &t.prompts).all(|p| p.expected.is_some()));
    let sweep = |p: Parameter, base: Setting| {
        s.sweeps
            .iter()
            .find(|w| w.parameter == p && w.base == base)
            .unwrap_or_else(|| panic!("no {p:?} sweep from {base:?}"))
    };
    let d = Setting::default();
    let t = sweep(Parameter::Temperature, d);
    assert_eq!((t.values[0], *t.values.last().unwrap()), (0.0, 1.5));
    for p in [Parameter::TopP, Parameter::TopK, Parameter::MinP] {
        assert!(sweep(p, Setting { temperature: 1.0, ..d }).values.len() >= 3);
    }
    for base in [Setting { temperature: 0.0, ..d }, Setting { temperature: 0.8, ..d }] {
        let r = sweep(Parameter::RepetitionPenalty, base);
        assert_eq!((r.values[0], *r.values.last().unwrap()), (1.0, 2.0));
        assert!(sweep(Parameter::NoRepeatNgramSize, base).values.len() >= 3);
    }
    let a = sweep(Parameter::PenaltyAlpha, Setting { temperature: 0.0, top_k: 4, ..d });
    assert_eq!((a.values[0], *a.values.last().unwrap()), (0.0, 1.0));
    assert!(sweep(Parameter::TopK, Setting { temperature: 0.0, penalty_alpha: 0.6, ..d }).values.len() >= 4);
    // About six points per sweep, or a grid trimmed to fit the hour and the report saying so.
    assert!(s.sweeps.iter().all(|w| w.values.len() >= 3));
    if s.sweeps.iter().any(|w| w.values.len() < 6) {
        assert!(s.intro.contains("the grid was trimmed"), "{}", s.intro);
    }
}

#[test]
fn bad_studies_fail_with_located_errors() {
    let err = |sweeps: &str| study(sweeps).unwrap_err().to_string();
    let e = err("[[sweep]]\nname = \"x\"\nparameter = \"temprature\"\nvalues = [1.0]");
    assert!(e.contains("temprature") && e.contains("line"), "{e}");
    let e = err("[[sweep]]\nname = \"x\"\nparameter = \"top_p\"\nvalues = [0.0]");
    assert_eq!(e, "sweep `x`: top-p = 0 is out of range");
    let e = err("[[sweep]]\nname = \"x\"\nparameter = \"top_k\"\nvalues = [2.5]");
    assert!(e.starts_with("sweep `x`: top-k"), "{e}");
    let e = err("[[sweep]]\nname = \"x\"\nparameter = \"top_p\"\nvalues = []");
    assert_eq!(e, "sweep `x`: no values");
    let e = err("[[sweep]]\nname = \"x\"\nparameter = \"top_p\"\nvalues = [0.5]\ntasks = [\"nope\"]");
    assert_eq!(e, "sweep `x`: no task `nope`");
    let e = err("[[sweep]]\nname = \"x\"\nparameter = \"top_p\"\nvalues = [0.5]\n[[sweep]]\nname = \"x\"\nparameter = \"top_p\"\nvalues = [0.5]");
    assert_eq!(e, "sweep `x`: the name is used twice");
    let e =
        err("[[sweep]]\nname = \"x\"\nparameter = \"top_p\"\nvalues = [0.5]\nbase = { temperature = 1.0, typo = 1 }");
    assert!(e.contains("typo"), "{e}");
    assert!(matches!(Study::from_toml("title = 1"), Err(StudyError::Toml(_))));
}
