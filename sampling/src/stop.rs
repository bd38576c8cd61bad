//! [`StopStrings`]: cuts the generated text at the first stop string, streaming the rest.

/// What one [`StopStrings::push`] lets through.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StopOutput {
    /// Text that is final: no stop string can start in it any more.
    pub emit: String,
    /// `Some(i)` once `stops[i]` matched: generation should end. Nothing of the stop string,
    /// nor anything after it, is ever emitted.
    pub stopped: Option<usize>,
}

/// A streaming filter that ends the generated text at the first occurrence of any stop
/// string.
///
/// Text is pushed piece by piece (one token's text, say) and comes out as early as possible:
/// only the shortest tail that could still begin a stop string is held back. A stop string
/// may span any number of pieces.
///
/// **Which match wins:** the one that starts first in the text, exactly as if the whole text
/// were cut at the first occurrence of any stop string. So a complete match is not reported
/// while a stop string that starts earlier could still complete (stops `"abcd"` and `"bc"`,
/// text `"abc"`: held until the next piece says). Among stop strings starting at the same
/// place the shortest wins, since it completes first (stops `"ab"` and `"abc"`: `"ab"`); the
/// emitted text is the same either way. Equal stop strings: the lowest index.
///
/// An empty stop string matches at once ([`SamplingParams::validate`] rejects them).
///
/// [`SamplingParams::validate`]: crate::SamplingParams::validate
///
/// # Example
///
/// The naive way, checking each piece for the stop string, misses `"\n\n"` split over two
/// pieces and lets the first `"\n"` out; this filter holds it back until it knows:
///
/// ```
/// use stencil_sampling::{StopOutput, StopStrings};
///
/// let mut stop = StopStrings::new(["\n\n", "END"]);
/// assert_eq!(stop.push("Hello").emit, "Hello");
/// assert_eq!(stop.push(" world\n").emit, " world"); // "\n" could start "\n\n": held
/// assert_eq!(stop.push("\nignored"), StopOutput { emit: String::new(), stopped: Some(0) });
///
/// let mut stop = StopStrings::new(["END"]);
/// assert_eq!(stop.push("a\nE").emit, "a\n");
/// assert_eq!(stop.push("Nd").emit, "ENd"); // not "END" after all
/// assert_eq!(stop.push("E").emit, "");
/// assert_eq!(stop.finish(), "E"); // the text ended: flush what was held
/// ```
#[derive(Clone, Debug)]
pub struct StopStrings {
    stops: Vec<String>,
    /// The longest stop string, in bytes.
    max_len: usize,
    /// Text pushed but not yet emitted: the start of a possible stop string (bounded by
    /// `max_len`).
    held: String,
    stopped: Option<usize>,
}

impl StopStrings {
    /// A filter for `stops`; indices in [`StopOutput::stopped`] refer to this order.
    pub fn new<I, S>(stops: I) -> StopStrings
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let stops: Vec<String> = stops.into_iter().map(Into::into).collect();
        let max_len = stops.iter().map(String::len).max().unwrap_or(0);
        StopStrings { stops, max_len, held: String::new(), stopped: None }
    }

    /// Adds the next piece of text; returns the text that is now final and whether a stop
    /// string matched. Once stopped, every later push returns no text and the same index.
    pub fn push(&mut self, piece: &str) -> StopOutput {
        if let Some(i) = self.stopped {
            return StopOutput { emit: String::new(), stopped: Some(i) };
        }
        self.held.push_str(piece);
        let found = self.first_match();
        let limit = found.map_or(self.held.len(), |(at, _)| at);
        match (self.first_partial(limit), found) {
            (None, Some((at, i))) => {
                let mut emit = std::mem::take(&mut self.held);
                emit.truncate(at);
                self.stopped = Some(i);
                StopOutput { emit, stopped: Some(i) }
            }
            (partial, _) => {
                let keep = self.held.split_off(partial.unwrap_or(self.held.len()));
                StopOutput { emit: std::mem::replace(&mut self.held, keep), stopped: None }
            }
        }
    }

    /// The text ended: returns what was held back, up to a stop string if one matched while
    /// waiting on a longer, earlier one.
    pub fn finish(self) -> String {
        self.finish_output().emit
    }

    /// [`finish`](StopStrings::finish), also saying whether the held text ended in a match.
    pub fn finish_output(mut self) -> StopOutput {
        if self.stopped.is_some() {
            return StopOutput { emit: String::new(), stopped: self.stopped };
        }
        let stopped = self.first_match().map(|(at, i)| {
            self.held.truncate(at);
            i
        });
        StopOutput { emit: self.held, stopped }
    }

    /// Whether a stop string has matched.
    pub fn is_stopped(&self) -> bool {
        self.stopped.is_some()
    }

    /// The text held back for now.
    pub fn held(&self) -> &str {
        &self.held
    }

    /// The first complete match in `held`: (byte offset, stop index); ties → shortest, then
    /// lowest index.
    fn first_match(&self) -> Option<(usize, usize)> {
        self.stops
            .iter()
            .enumerate()
            .filter_map(|(i, s)| self.held.find(s.as_str()).map(|at| (at, s.len(), i)))
            .min()
            .map(|(at, _, i)| (at, i))
    }

    /// The first offset before `limit` where the rest of `held` is a proper prefix of some
    /// stop string (a match could still start there).
    fn first_partial(&self, limit: usize) -> Option<usize> {
        let held = self.held.as_bytes();
        let from = held.len().saturating_sub(self.max_len.saturating_sub(1));
        (from..limit.min(held.len())).filter(|&at| self.held.is_char_boundary(at)).find(|&at| {
            let tail = &held[at..];
            self.stops.iter().any(|s| s.len() > tail.len() && s.as_bytes().starts_with(tail))
        })
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Pushes `pieces`, returns everything emitted (with `finish`) and the stop index.
    fn run(stops: &[&str], pieces: &[&str]) -> (String, Option<usize>) {
        let mut filter = StopStrings::new(stops.iter().copied());
        let mut text = String::new();
        for piece in pieces {
            text.push_str(&filter.push(piece).emit);
        }
        let end = filter.finish_output();
        text.push_str(&end.emit);
        (text, end.stopped)
    }

    /// The oracle: the text cut at the first occurrence of any stop string.
    fn cut(stops: &[&str], text: &str) -> (String, Option<usize>) {
        let first = stops.iter().enumerate().filter_map(|(i, s)| text.find(s).map(|at| (at, s.len(), i))).min();
        match first {
            Some((at, _, i)) => (text[..at].to_string(), Some(i)),
            None => (text.to_string(), None),
        }
    }

    #[test]
    fn split_across_many_pieces() {
        assert_eq!(run(&["STOP"], &["abc S", "T", "O", "P", " after"]), ("abc ".into(), Some(0)));
        assert_eq!(run(&["STOP"], &["S", "T", "O", "x"]), ("STOx".into(), None));
        let mut f = StopStrings::new(["<|end|>"]);
        assert_eq!(f.push("x<").emit, "x");
        assert_eq!(f.push("|en").emit, "");
        assert_eq!(f.held(), "<|en");
        assert_eq!(f.push("d|").emit, "");
        assert_eq!(f.push(">tail").stopped, Some(0));
        assert!(f.is_stopped());
        assert_eq!(f.push("more"), StopOutput { emit: String::new(), stopped: Some(0) });
        assert_eq!(f.finish(), "");
    }

    #[test]
    fn overlapping_prefixes() {
        // "ab" completes at "aab"; "abc" starts at the same place: the shorter wins now.
        let mut f = StopStrings::new(["ab", "abc"]);
        assert_eq!(f.push("aab"), StopOutput { emit: "a".into(), stopped: Some(0) });
        // A stop string starting earlier that may still complete delays a later match.
        let mut f = StopStrings::new(["abcd", "bc"]);
        assert_eq!(f.push("xabc"), StopOutput { emit: "x".into(), stopped: None });
        assert_eq!(f.push("d"), StopOutput { emit: String::new(), stopped: Some(0) });
        let mut f = StopStrings::new(["abcd", "bc"]);
        f.push("xabc");
        assert_eq!(f.push("e"), StopOutput { emit: "a".into(), stopped: Some(1) });
        // The text ends while waiting: finish cuts at the pending match.
        let mut f = StopStrings::new(["abcd", "bc"]);
        f.push("xabc");
        assert_eq!(f.finish_output(), StopOutput { emit: "a".into(), stopped: Some(1) });
        // Self-overlapping stop string: "aab" inside "aaab".
        assert_eq!(run(&["aab"], &["a", "a", "a", "b"]), ("a".into(), Some(0)));
    }

    #[test]
    fn holds_back_only_what_could_start_a_stop_string() {
        let mut f = StopStrings::new(["xyz", "yq"]);
        assert_eq!(f.push("axy").emit, "a");
        assert_eq!(f.push("y").emit, "xy");
        assert_eq!(f.held(), "y");
        let mut f = StopStrings::new(["abc"]);
        assert_eq!(f.push("cab").emit, "c");
        assert_eq!(f.push("").emit, "");
        assert_eq!(f.push("x").emit, "abx");
    }

    #[test]
    fn multibyte() {
        assert_eq!(run(&["é!"], &["caf", "é", "!", "x"]), ("caf".into(), Some(0)));
        assert_eq!(run(&["🙂🙂"], &["a🙂", "b🙂", "🙂c"]), ("a🙂b".into(), Some(0)));
        let mut f = StopStrings::new(["éa"]);
        assert_eq!(f.push("ééé").emit, "éé");
        assert_eq!(f.push("b").emit, "éb");
    }

    #[test]
    fn edge_cases() {
        assert_eq!(run(&[], &["a", "b"]), ("ab".into(), None));
        assert_eq!(run(&[""], &["a", "b"]), ("".into(), Some(0)));
        assert_eq!(run(&["a", "a"], &["xa"]), ("x".into(), Some(0)));
        assert_eq!(run(&["abc", "b"], &["ab"]), ("a".into(), Some(1)));
    }

    fn text() -> impl Strategy<Value = String> {
        proptest::collection::vec(prop_oneof![Just("a"), Just("b"), Just("c"), Just("é"), Just("🙂")], 0..12)
            .prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn streaming_equals_cutting_the_whole_text(
            stops in proptest::collection::vec(text().prop_filter("non-empty", |s| !s.is_empty()), 0..4),
            text in proptest::collection::vec(text(), 0..8),
        ) {
            let stops: Vec<&str> = stops.iter().map(String::as_str).collect();
            let pieces: Vec<&str> = text.iter().map(String::as_str).collect();
            let whole = text.concat();
            prop_assert_eq!(run(&stops, &pieces), cut(&stops, &whole));

            // As early as possible: after each push, the emitted text is the text so far up to
            // the first place where a stop string starts or may still start.
            let mut filter = StopStrings::new(stops.iter().copied());
            let (mut so_far, mut emitted) = (String::new(), String::new());
            for piece in &pieces {
                so_far.push_str(piece);
                emitted.push_str(&filter.push(piece).emit);
                let possible = (0..=so_far.len()).filter(|&at| so_far.is_char_boundary(at)).find(|&at| {
                    let tail = &so_far[at..];
                    stops.iter().any(|s| tail.starts_with(s) || (s.len() > tail.len() && s.starts_with(tail)))
                });
                prop_assert_eq!(&emitted, &so_far[..possible.unwrap_or(so_far.len())]);
                if filter.is_stopped() {
                    break;
                }
            }
        }
    }
}
