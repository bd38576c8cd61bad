//! [`Utf8Stream`]: token byte pieces → valid UTF-8 text, as they come.

/// Turns a stream of byte pieces (one token's bytes at a time) into UTF-8 text pieces.
///
/// A token may end in the middle of a character (byte-level BPE, SentencePiece byte
/// fallback): the incomplete trailing sequence, at most 3 bytes, is held until the next
/// piece completes it. Invalid bytes become U+FFFD, one per maximal invalid subsequence,
/// exactly as [`String::from_utf8_lossy`] does; a sequence still incomplete at
/// [`finish`](Utf8Stream::finish) becomes one U+FFFD. So, however the bytes are split, the
/// concatenated output is `String::from_utf8_lossy` of the concatenated input.
///
/// # Example
///
/// Decoding each token on its own, the naive way, turns a split `é` (`C3 A9`) into two
/// U+FFFD; the stream holds the first byte back:
///
/// ```
/// use stencil_sampling::Utf8Stream;
///
/// assert_eq!(String::from_utf8_lossy(b"caf\xC3"), "caf\u{FFFD}");
///
/// let mut stream = Utf8Stream::new();
/// assert_eq!(stream.push(b"caf\xC3"), "caf");
/// assert_eq!(stream.push(b"\xA9!"), "é!");
/// assert_eq!(stream.push(b"\xFF\xE2\x82"), "\u{FFFD}");
/// assert_eq!(stream.finish(), "\u{FFFD}"); // the incomplete "\xE2\x82"
/// ```
#[derive(Clone, Debug, Default)]
pub struct Utf8Stream {
    /// An incomplete sequence at the end of the input so far (0 to 3 bytes).
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// An empty stream.
    pub fn new() -> Self {
        Utf8Stream::default()
    }

    /// Adds `bytes`; returns the longest text that is now complete.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        let mut out = String::with_capacity(bytes.len() + 3);
        if self.pending.is_empty() {
            self.decode(bytes, &mut out);
        } else {
            let mut joined = std::mem::take(&mut self.pending);
            joined.extend_from_slice(bytes);
            self.decode(&joined, &mut out);
        }
        out
    }

    /// Ends the stream: U+FFFD if an incomplete sequence was held, else nothing.
    pub fn finish(self) -> String {
        if self.pending.is_empty() {
            String::new()
        } else {
            '\u{FFFD}'.to_string()
        }
    }

    /// Whether an incomplete sequence is held back.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    fn decode(&mut self, mut bytes: &[u8], out: &mut String) {
        loop {
            match std::str::from_utf8(bytes) {
                Ok(text) => {
                    out.push_str(text);
                    return;
                }
                Err(error) => {
                    let (valid, rest) = bytes.split_at(error.valid_up_to());
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match error.error_len() {
                        None => {
                            self.pending.extend_from_slice(rest); // at most 3 bytes
                            return;
                        }
                        Some(len) => {
                            out.push('\u{FFFD}');
                            bytes = rest.get(len..).unwrap_or_default();
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn stream(pieces: &[&[u8]]) -> String {
        let mut s = Utf8Stream::new();
        let mut out: String = pieces.iter().map(|p| s.push(p)).collect();
        out.push_str(&s.finish());
        out
    }

    #[test]
    fn splits_inside_characters() {
        let text = "a€🙂é";
        let bytes = text.as_bytes();
        for i in 0..bytes.len() {
            for j in i..bytes.len() {
                assert_eq!(stream(&[&bytes[..i], &bytes[i..j], &bytes[j..]]), text);
            }
        }
        let single: Vec<&[u8]> = bytes.chunks(1).collect();
        assert_eq!(stream(&single), text);
    }

    #[test]
    fn invalid_bytes() {
        assert_eq!(stream(&[b"\xC3", b"x"]), "\u{FFFD}x");
        assert_eq!(stream(&[b"\xF0\x9F", b"\x99"]), "\u{FFFD}");
        assert_eq!(stream(&[b"\x80\x80"]), "\u{FFFD}\u{FFFD}");
        assert_eq!(stream(&[b"\xED\xA0\x80"]), "\u{FFFD}\u{FFFD}\u{FFFD}"); // a surrogate
        let mut s = Utf8Stream::new();
        assert_eq!(s.push(b"\xE2\x82"), "");
        assert!(s.has_pending());
        assert_eq!(s.push(b""), "");
        assert_eq!(s.push(b"\xAC"), "€");
        assert!(!s.has_pending());
    }

    proptest! {
        #[test]
        fn any_split_of_valid_text_round_trips(text in "\\PC{0,24}", cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6)) {
            let bytes = text.as_bytes();
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
            at.sort();
            let mut pieces = Vec::new();
            let mut start = 0;
            for &cut in &at {
                pieces.push(&bytes[start..cut]);
                start = cut;
            }
            pieces.push(&bytes[start..]);
            prop_assert_eq!(stream(&pieces), text);
        }

        #[test]
        fn any_bytes_any_split_is_from_utf8_lossy(pieces in proptest::collection::vec(proptest::collection::vec(prop_oneof![any::<u8>(), 0x80u8..0xC0, 0xE0u8..0xF5], 0..6), 0..8)) {
            let pieces: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
            let whole = pieces.concat();
            prop_assert_eq!(stream(&pieces), String::from_utf8_lossy(&whole));
        }
    }
}
