//! Majority vote over sampled answers (self-consistency), with early stopping.

use std::collections::HashMap;

use super::{Extractor, Normalizer};

/// A running majority vote: push each sample's answer key (`None`: the sample abstained)
/// in sample order; ask for the [`leader`](Tally::leader) at any time and whether it is
/// [`decided`](Tally::decided).
///
/// Samples are numbered from 0 in the order they are pushed, so push them in the order of
/// their sample index (a decode loop that finishes a wave out of order sorts it first).
///
/// **Tie-break:** among answers with the same count, the one whose *first* occurrence
/// came earliest wins (the lowest sample index). This is fixed by the order of first
/// occurrences alone, so pushing more samples of the tied answers cannot reorder them.
///
/// ```
/// use stencil_runtime::select::Tally;
///
/// let mut tally = Tally::new();
/// for answer in ["b", "a", "a", "b"] {
///     tally.push(Some(answer.to_string()));
/// }
/// // Two each: `b` was seen first (sample 0), so `b` leads.
/// assert_eq!(tally.leader(), Some("b"));
/// assert_eq!(tally.counts(), vec![("b".to_string(), 2), ("a".to_string(), 2)]);
/// // With 3 samples still to come `a` could pass `b`: not decided.
/// assert!(!tally.decided(3));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Distinct answers in the order of their first occurrence.
    entries: Vec<Entry>,
    /// Answer → position in `entries`.
    positions: HashMap<String, usize>,
    samples: usize,
    abstained: usize,
    /// Position of the leader in `entries`.
    leader: Option<usize>,
}

#[derive(Clone, Debug)]
struct Entry {
    answer: String,
    count: usize,
    first_sample: usize,
}

impl Tally {
    /// An empty tally.
    pub fn new() -> Tally {
        Tally::default()
    }

    /// Counts one sample: `Some(key)` votes for `key`, `None` abstains. Returns the
    /// sample's number (0 for the first push).
    pub fn push(&mut self, answer: Option<String>) -> usize {
        let sample = self.samples;
        self.samples += 1;
        let Some(answer) = answer else {
            self.abstained += 1;
            return sample;
        };
        let position = match self.positions.get(&answer) {
            Some(&position) => position,
            None => {
                let position = self.entries.len();
                self.positions.insert(answer.clone(), position);
                self.entries.push(Entry { answer, count: 0, first_sample: sample });
                position
            }
        };
        self.entries[position].count += 1;
        // Only this entry's count changed, and only upwards: the leader is either the old
        // one or this one.
        self.leader = match self.leader {
            Some(leader) if !self.beats(position, leader) => Some(leader),
            _ => Some(position),
        };
        sample
    }

    /// Extracts and normalizes `text`'s answer and [pushes](Tally::push) it (abstaining when
    /// there is none, or when it normalizes to the empty string: [`Normalizer::key`]).
    /// Returns the sample's number.
    pub fn push_text(&mut self, text: &str, extractor: &Extractor, normalizer: &Normalizer) -> usize {
        self.push(extractor.extract(text).and_then(|answer| normalizer.key(&answer)))
    }

    /// Whether entry `a` ranks above entry `b`: more votes, or as many and seen first.
    fn beats(&self, a: usize, b: usize) -> bool {
        let (a, b) = (&self.entries[a], &self.entries[b]);
        a.count > b.count || (a.count == b.count && a.first_sample < b.first_sample)
    }

    /// Samples pushed so far, abstentions included.
    pub fn samples(&self) -> usize {
        self.samples
    }

    /// Samples that abstained (no answer).
    pub fn abstained(&self) -> usize {
        self.abstained
    }

    /// Samples that gave an answer.
    pub fn answered(&self) -> usize {
        self.samples - self.abstained
    }

    /// The leading answer under the tie-break rule; `None` while no sample has answered.
    pub fn leader(&self) -> Option<&str> {
        self.leader.map(|position| self.entries[position].answer.as_str())
    }

    /// Votes for the leader (0 when there is none).
    pub fn leader_count(&self) -> usize {
        self.leader.map_or(0, |position| self.entries[position].count)
    }

    /// The first sample that gave the leading answer.
    pub fn leader_sample(&self) -> Option<usize> {
        self.leader.map(|position| self.entries[position].first_sample)
    }

    /// Votes for the best answer other than the leader (0 when there is none).
    pub fn runner_up_count(&self) -> usize {
        self.entries
            .iter()
            .enumerate()
            .filter(|&(position, _)| Some(position) != self.leader)
            .map(|(_, entry)| entry.count)
            .max()
            .unwrap_or(0)
    }

    /// Votes for `answer` (a normalized key).
    pub fn count(&self, answer: &str) -> usize {
        self.positions.get(answer).map_or(0, |&position| self.entries[position].count)
    }

    /// Every answer with its votes, by count (most first), ties in tie-break order.
    pub fn counts(&self) -> Vec<(String, usize)> {
        let mut entries: Vec<&Entry> = self.entries.iter().collect();
        // Stable: entries are already in order of first occurrence.
        entries.sort_by_key(|entry| std::cmp::Reverse(entry.count));
        entries.into_iter().map(|entry| (entry.answer.clone(), entry.count)).collect()
    }

    /// Whether the vote can no longer change with `remaining` more samples: the leader
    /// cannot be overtaken *or tied* even if every remaining sample went to the runner-up
    /// (or to an answer not seen yet), i.e. `leader_count > runner_up_count + remaining`.
    /// Always true when `remaining` is 0; false with samples remaining while nobody has
    /// answered. A decode loop that samples in waves asks this after each wave with the
    /// number of samples it has not drawn yet, and stops when it is true.
    ///
    /// Being strict about ties keeps the rule independent of the tie-break: a stop never
    /// depends on which sample came first.
    pub fn decided(&self, remaining: usize) -> bool {
        remaining == 0
            || (self.leader.is_some() && self.leader_count() > self.runner_up_count().saturating_add(remaining))
    }

    /// The result so far; `stopped_early` is recorded as given (see
    /// [`VoteOutcome::stopped_early`]).
    pub fn outcome(&self, stopped_early: bool) -> VoteOutcome {
        let answered = self.answered();
        VoteOutcome {
            winner: self.leader().map(str::to_string),
            winner_sample: self.leader_sample(),
            counts: self.counts(),
            agreement: if answered == 0 { 0.0 } else { self.leader_count() as f64 / answered as f64 },
            samples_used: self.samples,
            abstained: self.abstained,
            stopped_early,
        }
    }
}

/// The result of a majority vote.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct VoteOutcome {
    /// The winning answer key; `None` when no sample answered.
    pub winner: Option<String>,
    /// The first sample (0-based, in push order) that gave the winning answer: the one to
    /// return as the output.
    pub winner_sample: Option<usize>,
    /// Every answer with its votes, most first, ties in tie-break order (see [`Tally`]).
    pub counts: Vec<(String, usize)>,
    /// The winner's votes over the samples that gave an answer (abstentions left out), in
    /// `[0, 1]`; 0 when none answered. 1 means every answering sample agreed.
    pub agreement: f64,
    /// Samples counted, abstentions included.
    pub samples_used: usize,
    /// Samples counted that gave no answer.
    pub abstained: usize,
    /// Whether the vote stopped because it was [decided](Tally::decided) while planned
    /// samples were still to come.
    pub stopped_early: bool,
}

/// Self-consistency: extracts and normalizes each text's answer in order and takes the
/// majority ([`Tally`]'s rules).
///
/// `total_planned` is the number of samples the caller means to draw; with `early_stop`,
/// the vote stops (and stops pulling from `texts`, which may decode lazily) as soon as the
/// leader cannot be overtaken or tied by the samples planned but not yet counted. Texts
/// beyond `total_planned` are still counted; fewer are fine too.
///
/// ```
/// use stencil_runtime::select::{self_consistency, Extractor, Normalizer};
///
/// let texts = [r#"{"answer": 42}"#, r#"{"answer": 41}"#, r#"{"answer": 42.0}"#, r#"{"answer": "42"}"#, "oops"];
/// let vote = self_consistency(texts, &Extractor::json_pointer("/answer")?, &Normalizer::default(), 5, false);
/// assert_eq!(vote.winner.as_deref(), Some("42"));
/// assert_eq!(vote.winner_sample, Some(0));
/// assert_eq!(vote.abstained, 1);
/// assert_eq!(vote.agreement, 0.75);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn self_consistency<I>(
    texts: I,
    extractor: &Extractor,
    normalizer: &Normalizer,
    total_planned: usize,
    early_stop: bool,
) -> VoteOutcome
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let mut tally = Tally::new();
    for text in texts {
        tally.push_text(text.as_ref(), extractor, normalizer);
        let remaining = total_planned.saturating_sub(tally.samples());
        if early_stop && remaining > 0 && tally.decided(remaining) {
            return tally.outcome(true);
        }
    }
    tally.outcome(false)
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn some(s: &str) -> Option<String> {
        Some(s.to_string())
    }

    fn counts(pairs: &[(&str, usize)]) -> Vec<(String, usize)> {
        pairs.iter().map(|&(a, n)| (a.to_string(), n)).collect()
    }

    /// Each text's last line is its answer.
    fn vote(texts: &[&str], planned: usize, early_stop: bool) -> VoteOutcome {
        self_consistency(texts.iter(), &Extractor::LastLine, &Normalizer::default(), planned, early_stop)
    }

    #[test]
    fn a_b_a_c_a_with_ten_planned_never_stops_early() {
        // leader count L, runner-up R, remaining r = 10 - samples; stop when L > R + r.
        //   after a:     L=1 R=0 r=9  1 > 9  no
        //   after b:     L=1 R=1 r=8  1 > 9  no
        //   after a:     L=2 R=1 r=7  2 > 8  no
        //   after c:     L=2 R=1 r=6  2 > 7  no
        //   after a:     L=3 R=1 r=5  3 > 6  no
        let mut tally = Tally::new();
        let expected = [(1, 0), (1, 1), (2, 1), (2, 1), (3, 1)];
        for (i, answer) in ["a", "b", "a", "c", "a"].into_iter().enumerate() {
            assert_eq!(tally.push(some(answer)), i);
            assert_eq!((tally.leader_count(), tally.runner_up_count()), expected[i], "after sample {i}");
            assert!(!tally.decided(10 - tally.samples()), "after sample {i}");
        }
        let outcome = vote(&["x\na", "x\nb", "a", "c", "a"], 10, true);
        assert_eq!(outcome.winner.as_deref(), Some("a"));
        assert_eq!(outcome.winner_sample, Some(0));
        assert_eq!(outcome.counts, counts(&[("a", 3), ("b", 1), ("c", 1)]));
        assert_eq!(outcome.agreement, 3.0 / 5.0);
        assert_eq!((outcome.samples_used, outcome.abstained, outcome.stopped_early), (5, 0, false));
        // The same five with the vote over (nothing remaining) is decided, but not early.
        assert!(tally.decided(0));
    }

    #[test]
    fn early_stop_after_the_seventh_of_ten() {
        // a b a a a a a a a a, 10 planned:
        //   after 6 (a×5, b×1): r=4, 5 > 1 + 4 is false
        //   after 7 (a×6, b×1): r=3, 6 > 1 + 3 is true: stop, samples 8-10 never pulled
        let texts = ["a", "b", "a", "a", "a", "a", "a", "a", "a", "a"];
        let pulled = Cell::new(0);
        let outcome = self_consistency(
            texts.iter().inspect(|_| pulled.set(pulled.get() + 1)),
            &Extractor::LastLine,
            &Normalizer::default(),
            10,
            true,
        );
        assert_eq!(pulled.get(), 7);
        assert_eq!(outcome.samples_used, 7);
        assert!(outcome.stopped_early);
        assert_eq!(outcome.winner.as_deref(), Some("a"));
        assert_eq!(outcome.counts, counts(&[("a", 6), ("b", 1)]));
        assert_eq!(outcome.agreement, 6.0 / 7.0);
        // Without early stopping all ten count.
        let outcome = vote(&texts, 10, false);
        assert_eq!((outcome.samples_used, outcome.stopped_early), (10, false));
        assert_eq!(outcome.counts, counts(&[("a", 9), ("b", 1)]));
    }

    #[test]
    fn early_stop_needs_a_strict_lead() {
        // a a a b b, 5 planned: after 3, L=3 R=0 r=2, 3 > 2: stop.
        let outcome = vote(&["a", "a", "a", "b", "b"], 5, true);
        assert_eq!((outcome.samples_used, outcome.stopped_early), (3, true));
        assert_eq!(outcome.counts, counts(&[("a", 3)]));
        // a a b b, 4 planned: after 2, L=2 R=0 r=2, 2 > 2 is false (b could still tie);
        // after 3, L=2 R=1 r=1, 2 > 2 false; all four used, a and b tie, a first.
        let outcome = vote(&["a", "a", "b", "b"], 4, true);
        assert_eq!((outcome.samples_used, outcome.stopped_early), (4, false));
        assert_eq!(outcome.winner.as_deref(), Some("a"));
        assert_eq!(outcome.counts, counts(&[("a", 2), ("b", 2)]));
        assert_eq!(outcome.agreement, 0.5);
    }

    #[test]
    fn one_sample_wins_alone() {
        let outcome = vote(&["reasoning\n 7 "], 1, true);
        assert_eq!(outcome.winner.as_deref(), Some("7"));
        assert_eq!(outcome.winner_sample, Some(0));
        assert_eq!(outcome.counts, counts(&[("7", 1)]));
        assert_eq!(
            (outcome.agreement, outcome.samples_used, outcome.abstained, outcome.stopped_early),
            (1.0, 1, 0, false)
        );
        // One sample of several planned: decided only if a lead of 1 beats what remains.
        let mut tally = Tally::new();
        tally.push(some("7"));
        assert!(!tally.decided(1));
        assert!(tally.decided(0));
    }

    #[test]
    fn ties_go_to_the_answer_seen_first() {
        // b a a b: both 2. b's first occurrence is sample 0, a's is 1, so b wins, although
        // a reached 2 votes first (sample 2).
        let outcome = vote(&["b", "a", "a", "b"], 4, false);
        assert_eq!(outcome.winner.as_deref(), Some("b"));
        assert_eq!(outcome.winner_sample, Some(0));
        assert_eq!(outcome.counts, counts(&[("b", 2), ("a", 2)]));
        // Three-way tie with abstentions in front: first occurrences at 1 (z), 2 (y), 3 (x).
        let mut tally = Tally::new();
        for answer in [None, some("z"), some("y"), some("x"), some("x"), some("y"), some("z")] {
            tally.push(answer);
        }
        assert_eq!(tally.leader(), Some("z"));
        assert_eq!(tally.leader_sample(), Some(1));
        assert_eq!(tally.counts(), counts(&[("z", 2), ("y", 2), ("x", 2)]));
        // One more y breaks the tie.
        tally.push(some("y"));
        assert_eq!(tally.leader(), Some("y"));
        assert_eq!(tally.leader_sample(), Some(2));
        assert_eq!(tally.counts(), counts(&[("y", 3), ("z", 2), ("x", 2)]));
        assert_eq!((tally.count("y"), tally.count("w")), (3, 0));
    }

    #[test]
    fn abstentions_do_not_vote() {
        // Blank texts have no last line.
        let outcome = vote(&["", "a", "  \n", "b", "a"], 5, false);
        assert_eq!(outcome.winner.as_deref(), Some("a"));
        assert_eq!(outcome.winner_sample, Some(1));
        assert_eq!((outcome.samples_used, outcome.abstained), (5, 2));
        assert_eq!(outcome.agreement, 2.0 / 3.0);
        // Abstentions still use up the plan: None, a, a, a with 4 planned stops after
        // sample 3 (L=2 R=0 r=1).
        let outcome = vote(&["", "a", "a", "a"], 4, true);
        assert_eq!((outcome.samples_used, outcome.abstained, outcome.stopped_early), (3, 1, true));
        // Nobody answers.
        let outcome = vote(&["", " ", "\n"], 3, true);
        assert_eq!(outcome.winner, None);
        assert_eq!(outcome.winner_sample, None);
        assert!(outcome.counts.is_empty());
        assert_eq!(
            (outcome.agreement, outcome.samples_used, outcome.abstained, outcome.stopped_early),
            (0.0, 3, 3, false)
        );
        let tally = Tally::new();
        assert!(!tally.decided(1));
        assert!(tally.decided(0));
        assert_eq!((tally.leader(), tally.leader_count(), tally.runner_up_count()), (None, 0, 0));
        // No texts at all.
        let outcome = vote(&[], 3, true);
        assert_eq!((outcome.winner, outcome.samples_used, outcome.stopped_early), (None, 0, false));
    }

    #[test]
    fn json_answers_vote_by_value() {
        let texts = [
            r#"{"reasoning": "6 × 7", "answer": 42}"#,
            r#"{"reasoning": "guess", "answer": 41}"#,
            r#"{"reasoning": "...", "answer": "42"}"#,
            "not json",
            r#"{"reasoning": "...", "answer": 4.2e1}"#,
            r#"{"reasoning": "...", "answer": null}"#,
        ];
        let extractor = Extractor::json_pointer("/answer").unwrap();
        let outcome = self_consistency(texts, &extractor, &Normalizer::default(), 6, false);
        assert_eq!(outcome.winner.as_deref(), Some("42"));
        assert_eq!(outcome.winner_sample, Some(0));
        assert_eq!(outcome.counts, counts(&[("42", 3), ("41", 1), ("null", 1)]));
        assert_eq!((outcome.samples_used, outcome.abstained), (6, 1));
        assert_eq!(outcome.agreement, 3.0 / 5.0);
        // Without the normalizer the three spellings split.
        let outcome = self_consistency(texts, &extractor, &Normalizer::none(), 6, false);
        assert_eq!(outcome.counts, counts(&[("42", 1), ("41", 1), ("\"42\"", 1), ("42.0", 1), ("null", 1)]));
    }

    #[test]
    fn waves_ask_decided_between_pushes() {
        // A decode loop of 3 waves of 4 (12 planned), answers per wave as below.
        let waves = [["a", "a", "b", "a"], ["a", "a", "c", "a"], ["b", "b", "b", "b"]];
        let mut tally = Tally::new();
        let mut waves_run = 0;
        for wave in waves {
            for answer in wave {
                tally.push(some(answer));
            }
            waves_run += 1;
            // After wave 1: a=3 b=1, r=8: 3 > 9 no. After wave 2: a=6 b=1 c=1, r=4:
            // 6 > 5 yes.
            if tally.decided(12 - tally.samples()) {
                break;
            }
        }
        assert_eq!(waves_run, 2);
        let outcome = tally.outcome(true);
        assert_eq!(outcome.counts, counts(&[("a", 6), ("b", 1), ("c", 1)]));
        assert_eq!(outcome.samples_used, 8);
    }
}
