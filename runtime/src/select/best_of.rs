//! Best-of-N: verifiers in order, then a ranking.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use serde_json::Value;
use stencil_schema::{InvalidSchema, Registry, Validator};

/// One sampled candidate, as the decode loop hands it over.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The sample's index (its KV sequence, its seed offset: whatever numbers the samples).
    pub index: usize,
    /// The generated text.
    pub text: String,
    /// The mean log-probability of its tokens under the sampling distribution; higher is
    /// more confident. NaN ranks as negative infinity.
    pub mean_logprob: f64,
    /// Tokens generated.
    pub tokens: usize,
    /// False when decoding was cut short (by `max_tokens` or the context): the candidate is
    /// rejected before any verifier runs, since its text is not the whole answer.
    pub complete: bool,
}

/// A user scorer: higher is better; `Err(message)` rejects the candidate with `message`.
pub type Scorer<'a> = Box<dyn FnMut(&Candidate) -> Result<f64, String> + 'a>;

/// The verifiers of best-of-N, run in this order on each candidate:
///
/// 0. **Complete**: a candidate cut short ([`Candidate::complete`]) is rejected.
/// 1. **Schema** (optional): the text must be one JSON document valid under the schema
///    (post hoc, [`stencil_schema::Validator`]); otherwise the candidate is rejected with
///    the parse error or the first validation issue.
/// 2. **Scorer** (optional): called only on candidates that passed the schema; its score
///    ranks them (higher first). An error, or a NaN score, rejects the candidate.
/// 3. **Mean log-probability**: ranks the candidates when there is no scorer, and breaks
///    the scorer's ties. Equal again, the lower [`Candidate::index`] wins.
///
/// ```
/// use serde_json::json;
/// use stencil_runtime::select::{Candidate, Verifiers};
///
/// let candidate = |index, text: &str, mean_logprob| Candidate { index, text: text.into(), mean_logprob, tokens: 5, complete: true };
/// let candidates = [
///     candidate(0, r#"{"answer": 1}"#, -0.10),
///     candidate(1, r#"{"answer": "one"}"#, -0.05),
///     candidate(2, r#"{"answer": 3}"#, -0.90),
/// ];
/// let schema = json!({"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]});
/// let mut verifiers = Verifiers::new().with_schema(&schema, &Default::default())?;
/// let best = verifiers.best_of(&candidates);
/// assert_eq!(best.winner, Some(0));
/// assert_eq!(best.reason, "valid under the schema; highest mean log-probability -0.10 (next -0.90); 1 of 3 candidates rejected");
/// assert!(best.ranking[2].rejected.as_deref().unwrap().starts_with("invalid under the schema: "));
///
/// // A scorer that prefers larger answers overrides the log-probabilities.
/// let mut verifiers = verifiers.with_scorer(|c: &stencil_runtime::select::Candidate| {
///     let value: serde_json::Value = serde_json::from_str(&c.text).map_err(|e| e.to_string())?;
///     value["answer"].as_f64().ok_or_else(|| "no numeric answer".to_string())
/// });
/// assert_eq!(verifiers.best_of(&candidates).winner, Some(2));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Default)]
pub struct Verifiers<'a> {
    validator: Option<Arc<Validator>>,
    scorer: Option<Scorer<'a>>,
}

impl fmt::Debug for Verifiers<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verifiers")
            .field("schema", &self.validator.is_some())
            .field("scorer", &self.scorer.is_some())
            .finish()
    }
}

/// Which verifier rejected a candidate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Incomplete,
    NotJson,
    Schema,
    Scorer,
}

impl<'a> Verifiers<'a> {
    /// No schema, no scorer: candidates rank by mean log-probability.
    pub fn new() -> Verifiers<'a> {
        Verifiers::default()
    }

    /// Checks candidates against a validator built once (shared between requests).
    pub fn with_validator(mut self, validator: Arc<Validator>) -> Verifiers<'a> {
        self.validator = Some(validator);
        self
    }

    /// Checks candidates against `schema`, `$ref`s resolved through `registry` only.
    ///
    /// # Errors
    /// [`InvalidSchema`] when the schema cannot be used for validation.
    pub fn with_schema(self, schema: &Value, registry: &Registry) -> Result<Verifiers<'a>, InvalidSchema> {
        Ok(self.with_validator(Arc::new(Validator::new(schema, registry)?)))
    }

    /// Ranks the candidates that pass the schema by `scorer` (higher is better).
    pub fn with_scorer(mut self, scorer: impl FnMut(&Candidate) -> Result<f64, String> + 'a) -> Verifiers<'a> {
        self.scorer = Some(Box::new(scorer));
        self
    }

    /// Runs the verifiers on one candidate: its score (`None` without a scorer), or why it
    /// is rejected.
    ///
    /// # Errors
    /// The rejection message: `not JSON: …`, `invalid under the schema: …` or `scorer: …`.
    pub fn check(&mut self, candidate: &Candidate) -> Result<Option<f64>, String> {
        self.check_staged(candidate).map_err(|(_, message)| message)
    }

    fn check_staged(&mut self, candidate: &Candidate) -> Result<Option<f64>, (Stage, String)> {
        if !candidate.complete {
            return Err((Stage::Incomplete, "incomplete: cut by max_tokens or the context".to_string()));
        }
        if let Some(validator) = &self.validator {
            let instance: Value =
                serde_json::from_str(&candidate.text).map_err(|e| (Stage::NotJson, format!("not JSON: {e}")))?;
            if let Err(issues) = validator.validate(&instance) {
                let mut message = String::from("invalid under the schema");
                if let Some(first) = issues.first() {
                    message.push_str(&format!(": {first}"));
                }
                if issues.len() > 1 {
                    message.push_str(&format!(" (and {} more)", issues.len() - 1));
                }
                return Err((Stage::Schema, message));
            }
        }
        match &mut self.scorer {
            None => Ok(None),
            Some(scorer) => match scorer(candidate) {
                Ok(score) if score.is_nan() => Err((Stage::Scorer, "scorer: score is NaN".to_string())),
                Ok(score) => Ok(Some(score)),
                Err(message) => Err((Stage::Scorer, format!("scorer: {message}"))),
            },
        }
    }

    /// Runs the verifiers on every candidate (in order) and ranks them. Never panics.
    pub fn best_of(&mut self, candidates: &[Candidate]) -> BestOf {
        let mut passed = Vec::new();
        let mut rejected = Vec::new();
        let mut stages = Vec::new();
        for candidate in candidates {
            match self.check_staged(candidate) {
                Ok(score) => passed.push(Ranked {
                    index: candidate.index,
                    score,
                    mean_logprob: candidate.mean_logprob,
                    rejected: None,
                }),
                Err((stage, message)) => {
                    stages.push(stage);
                    rejected.push(Ranked {
                        index: candidate.index,
                        score: None,
                        mean_logprob: candidate.mean_logprob,
                        rejected: Some(message),
                    });
                }
            }
        }
        // Stable, so equal candidates keep their input order.
        passed.sort_by(rank);
        let reason = match passed.first() {
            None => failure_reason(&rejected, &stages),
            Some(winner) => self.reason(winner, passed.get(1), candidates.len(), rejected.len()),
        };
        let winner = passed.first().map(|r| r.index);
        passed.extend(rejected);
        BestOf { winner, ranking: passed, reason }
    }

    fn reason(&self, winner: &Ranked, next: Option<&Ranked>, total: usize, rejected: usize) -> String {
        let mut parts = Vec::new();
        if self.validator.is_some() {
            parts.push("valid under the schema".to_string());
        }
        match next {
            None => {
                let mut only =
                    String::from(if rejected > 0 { "the only candidate that passed" } else { "the only candidate" });
                match winner.score {
                    Some(score) => only.push_str(&format!(", scorer score {}", single(score))),
                    None => only.push_str(&format!(", mean log-probability {}", single(winner.mean_logprob))),
                }
                parts.push(only);
            }
            Some(next) => {
                let mut by_logprob = true;
                if let (Some(w), Some(n)) = (winner.score, next.score) {
                    if w > n {
                        let (w, n) = pair(w, n);
                        parts.push(format!("highest scorer score {w} (next {n})"));
                        by_logprob = false;
                    } else {
                        parts.push(format!("scorer score {} tied with candidate {}", single(w), next.index));
                    }
                }
                if by_logprob {
                    let (w, n) = (logprob_key(winner.mean_logprob), logprob_key(next.mean_logprob));
                    if w > n {
                        let (w, n) = pair(winner.mean_logprob, next.mean_logprob);
                        parts.push(format!("highest mean log-probability {w} (next {n})"));
                    } else {
                        parts.push(format!(
                            "mean log-probability {} tied with candidate {}; lower index",
                            single(winner.mean_logprob),
                            next.index
                        ));
                    }
                }
            }
        }
        if rejected > 0 {
            parts.push(format!("{rejected} of {total} candidates rejected"));
        }
        parts.join("; ")
    }
}

fn failure_reason(rejected: &[Ranked], stages: &[Stage]) -> String {
    let Some(first) = rejected.first() else {
        return "no candidates".to_string();
    };
    let count = |stage| stages.iter().filter(|&&s| s == stage).count();
    let mut parts = Vec::new();
    for (stage, what) in [
        (Stage::Incomplete, "incomplete"),
        (Stage::NotJson, "not JSON"),
        (Stage::Schema, "invalid under the schema"),
        (Stage::Scorer, "rejected by the scorer"),
    ] {
        let n = count(stage);
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    format!(
        "no candidate passed: {} (first: candidate {}, {})",
        parts.join(", "),
        first.index,
        first.rejected.as_deref().unwrap_or("rejected")
    )
}

/// NaN log-probabilities rank lowest.
fn logprob_key(x: f64) -> f64 {
    if x.is_nan() {
        f64::NEG_INFINITY
    } else {
        x
    }
}

/// Score descending, then mean log-probability descending, then index ascending.
fn rank(a: &Ranked, b: &Ranked) -> Ordering {
    let score = match (a.score, b.score) {
        // Scores are never NaN here (rejected); -0.0 and 0.0 are equal.
        (Some(x), Some(y)) => y.partial_cmp(&x).unwrap_or(Ordering::Equal),
        _ => Ordering::Equal,
    };
    score
        .then_with(|| logprob_key(b.mean_logprob).partial_cmp(&logprob_key(a.mean_logprob)).unwrap_or(Ordering::Equal))
        .then_with(|| a.index.cmp(&b.index))
}

/// Two decimals, or scientific notation for a non-zero value that would print as zero.
fn single(x: f64) -> String {
    let text = format!("{x:.2}");
    if x != 0.0 && x.is_finite() && (text == "0.00" || text == "-0.00") {
        format!("{x:.2e}")
    } else {
        text
    }
}

/// Two values with just enough decimals (at least two) to tell them apart.
fn pair(a: f64, b: f64) -> (String, String) {
    for precision in 2..=17 {
        let (x, y) = (format!("{a:.precision$}"), format!("{b:.precision$}"));
        if x != y {
            return (x, y);
        }
    }
    (a.to_string(), b.to_string())
}

/// One candidate's place in a [`BestOf`] ranking.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Ranked {
    /// The candidate's [`Candidate::index`].
    pub index: usize,
    /// The scorer's score; `None` without a scorer or when rejected.
    pub score: Option<f64>,
    /// The candidate's mean log-probability.
    pub mean_logprob: f64,
    /// Why a verifier rejected it; `None` when it passed.
    pub rejected: Option<String>,
}

/// The result of best-of-N.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct BestOf {
    /// The winner's [`Candidate::index`]; `None` when every candidate was rejected (or
    /// there were none).
    pub winner: Option<usize>,
    /// Every candidate: those that passed, best first, then the rejected ones in input
    /// order.
    pub ranking: Vec<Ranked>,
    /// Why the winner won, in words (`valid under the schema; highest scorer score 0.93
    /// (next 0.71)`), or why there is none (`no candidate passed: …`).
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn candidate(index: usize, text: &str, mean_logprob: f64) -> Candidate {
        Candidate { index, text: text.to_string(), mean_logprob, tokens: text.len(), complete: true }
    }

    fn order(best: &BestOf) -> Vec<usize> {
        best.ranking.iter().map(|r| r.index).collect()
    }

    fn schema() -> Value {
        json!({"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]})
    }

    /// The answer over 4.
    fn quarter(c: &Candidate) -> Result<f64, String> {
        let value: Value = serde_json::from_str(&c.text).map_err(|e| e.to_string())?;
        value["answer"].as_f64().map(|a| a / 4.0).ok_or_else(|| "no numeric answer".to_string())
    }

    #[test]
    fn without_verifiers_the_mean_logprob_ranks() {
        let candidates = [candidate(0, "a", -0.5), candidate(1, "b", -0.21), candidate(2, "c", -0.35)];
        let best = Verifiers::new().best_of(&candidates);
        assert_eq!(best.winner, Some(1));
        assert_eq!(order(&best), [1, 2, 0]);
        assert!(best.ranking.iter().all(|r| r.score.is_none() && r.rejected.is_none()));
        assert_eq!(best.ranking[0].mean_logprob, -0.21);
        assert_eq!(best.reason, "highest mean log-probability -0.21 (next -0.35)");
    }

    #[test]
    fn close_logprobs_get_enough_digits() {
        let candidates = [candidate(4, "a", -0.2134), candidate(9, "b", -0.2131)];
        let best = Verifiers::new().best_of(&candidates);
        assert_eq!(best.winner, Some(9));
        assert_eq!(best.reason, "highest mean log-probability -0.2131 (next -0.2134)");
    }

    #[test]
    fn schema_then_scorer_then_logprob() {
        let candidates = [
            candidate(0, r#"{"answer": 1}"#, -0.1),
            candidate(1, r#"{"answer": "x"}"#, -0.05),
            candidate(2, "not json", 0.0),
            candidate(3, r#"{"answer": 3}"#, -0.9),
        ];
        let mut scored = Vec::new();
        let best = {
            let mut verifiers = Verifiers::new().with_schema(&schema(), &Registry::new()).unwrap().with_scorer(|c| {
                scored.push(c.index);
                quarter(c)
            });
            verifiers.best_of(&candidates)
        };
        // The scorer saw only the candidates that passed the schema.
        assert_eq!(scored, [0, 3]);
        assert_eq!(best.winner, Some(3));
        assert_eq!(order(&best), [3, 0, 1, 2]);
        assert_eq!(best.ranking[0].score, Some(0.75));
        assert_eq!(best.ranking[1].score, Some(0.25));
        assert_eq!(
            best.reason,
            "valid under the schema; highest scorer score 0.75 (next 0.25); 2 of 4 candidates rejected"
        );
        let invalid = best.ranking[2].rejected.as_deref().unwrap();
        assert!(invalid.starts_with("invalid under the schema: at \"/answer\""), "{invalid}");
        assert_eq!(best.ranking[2].score, None);
        let not_json = best.ranking[3].rejected.as_deref().unwrap();
        assert!(not_json.starts_with("not JSON: "), "{not_json}");
        // Without the scorer, the log-probability decides among the valid ones.
        let best = Verifiers::new().with_schema(&schema(), &Registry::new()).unwrap().best_of(&candidates);
        assert_eq!(order(&best), [0, 3, 1, 2]);
        assert_eq!(
            best.reason,
            "valid under the schema; highest mean log-probability -0.10 (next -0.90); 2 of 4 candidates rejected"
        );
    }

    #[test]
    fn scorer_ties_fall_to_logprob_then_index() {
        // Same score 0.5 for all; log-probabilities -0.3, -0.2, -0.2.
        let candidates = [candidate(5, "x", -0.3), candidate(7, "y", -0.2), candidate(6, "z", -0.2)];
        let mut verifiers = Verifiers::new().with_scorer(|_| Ok(0.5));
        let best = verifiers.best_of(&candidates);
        // 6 and 7 tie on both: the lower index, 6, first.
        assert_eq!(order(&best), [6, 7, 5]);
        assert_eq!(
            best.reason,
            "scorer score 0.50 tied with candidate 7; mean log-probability -0.20 tied with candidate 7; lower index"
        );
        // Scorer tie broken by log-probability.
        let best = verifiers.best_of(&candidates[..2]);
        assert_eq!(order(&best), [7, 5]);
        assert_eq!(
            best.reason,
            "scorer score 0.50 tied with candidate 5; highest mean log-probability -0.20 (next -0.30)"
        );
        // -0.0 and 0.0 are the same score.
        let mut signed = Verifiers::new().with_scorer(|c| Ok(if c.index == 5 { -0.0 } else { 0.0 }));
        assert_eq!(order(&signed.best_of(&candidates[..2])), [7, 5]);
    }

    #[test]
    fn scorer_errors_and_nan_reject() {
        let candidates = [candidate(0, "a", -0.1), candidate(1, "b", -0.2), candidate(2, "c", -0.3)];
        let mut verifiers = Verifiers::new().with_scorer(|c| match c.index {
            0 => Err("too long".to_string()),
            1 => Ok(f64::NAN),
            _ => Ok(f64::NEG_INFINITY),
        });
        let best = verifiers.best_of(&candidates);
        assert_eq!(best.winner, Some(2));
        assert_eq!(order(&best), [2, 0, 1]);
        assert_eq!(best.ranking[1].rejected.as_deref(), Some("scorer: too long"));
        assert_eq!(best.ranking[2].rejected.as_deref(), Some("scorer: score is NaN"));
        assert_eq!(best.reason, "the only candidate that passed, scorer score -inf; 2 of 3 candidates rejected");
        assert_eq!(verifiers.check(&candidates[0]), Err("scorer: too long".to_string()));
        assert_eq!(verifiers.check(&candidates[2]), Ok(Some(f64::NEG_INFINITY)));
    }

    #[test]
    fn no_candidate_passed() {
        let candidates =
            [candidate(0, "{", -0.1), candidate(1, r#"{"answer": 1.5}"#, -0.2), candidate(2, r#"{"answer": 2}"#, -0.3)];
        let mut verifiers = Verifiers::new()
            .with_schema(&schema(), &Registry::new())
            .unwrap()
            .with_scorer(|_| Err("wrong answer".to_string()));
        let best = verifiers.best_of(&candidates);
        assert_eq!(best.winner, None);
        assert_eq!(order(&best), [0, 1, 2]);
        assert!(best.ranking.iter().all(|r| r.rejected.is_some()));
        let prefix = "no candidate passed: 1 not JSON, 1 invalid under the schema, 1 rejected by the scorer (first: candidate 0, not JSON: ";
        assert!(best.reason.starts_with(prefix), "{}", best.reason);
        assert_eq!(
            Verifiers::new().best_of(&[]),
            BestOf { winner: None, ranking: vec![], reason: "no candidates".to_string() }
        );
    }

    #[test]
    fn a_single_candidate_wins_alone() {
        let best = Verifiers::new().best_of(&[candidate(3, "x", -1.25)]);
        assert_eq!(best.winner, Some(3));
        assert_eq!(best.reason, "the only candidate, mean log-probability -1.25");
        let best = Verifiers::new().best_of(&[candidate(0, "x", -0.0001)]);
        assert_eq!(best.reason, "the only candidate, mean log-probability -1.00e-4");
    }

    #[test]
    fn nan_logprob_ranks_last() {
        let candidates = [candidate(0, "a", f64::NAN), candidate(1, "b", -50.0)];
        let best = Verifiers::new().best_of(&candidates);
        assert_eq!(order(&best), [1, 0]);
        assert_eq!(best.reason, "highest mean log-probability -50.00 (next NaN)");
    }

    #[test]
    fn a_schema_that_cannot_validate_is_an_error() {
        assert!(Verifiers::new().with_schema(&json!({"pattern": "("}), &Registry::new()).is_err());
        let shared = Arc::new(Validator::new(&schema(), &Registry::new()).unwrap());
        let mut verifiers = Verifiers::new().with_validator(shared.clone());
        assert_eq!(verifiers.check(&candidate(0, r#"{"answer": 2}"#, 0.0)), Ok(None));
        let missing = verifiers.check(&candidate(0, "{}", 0.0)).unwrap_err();
        assert!(missing.starts_with("invalid under the schema: ") && missing.contains("required"), "{missing}");
        assert!(format!("{verifiers:?}").contains("schema: true"));
    }
}
