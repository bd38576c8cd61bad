//! The ground floor of the engine: sets of bytes ([`ByteSet`]), and which bytes and
//! characters are *plain text* (what a JSON string's interior takes without an escape,
//! and what the mask's text fast paths are about). It depends on nothing else in the
//! crate, and the automaton, the Earley parser, the token index and the mask cache all
//! use it.
//!
//! ```
//! use stencil_mask::bytes::ByteSet;
//! let digits = ByteSet::range(b'0', b'9');
//! let mut sign = ByteSet::EMPTY;
//! sign.insert(b'-');
//! let number_start = digits | sign;
//! assert!(number_start.contains(b'7') && number_start.contains(b'-') && !number_start.contains(b'+'));
//! assert_eq!(number_start.iter().count(), 11);
//! ```

use std::ops::{BitOr, BitOrAssign};

/// A set of bytes: one bit per byte value, 32 bytes, `Copy`.
///
/// ```
/// use stencil_mask::bytes::ByteSet;
/// let mut set = ByteSet::EMPTY;
/// assert!(set.is_empty());
/// set.insert(b'a');
/// set.insert(0xE2);
/// assert!(set.contains(b'a') && set.contains(0xE2) && !set.contains(b'b'));
/// assert_eq!(set.ascii(), 1 << b'a');
/// assert!(set.intersects(ByteSet::range(0xC0, 0xFF)));
/// assert_eq!(set.iter().collect::<Vec<_>>(), [b'a', 0xE2]);
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ByteSet([u64; 4]);

impl ByteSet {
    /// No byte.
    pub const EMPTY: ByteSet = ByteSet([0; 4]);

    /// The bytes `lo..=hi` (none when `lo > hi`).
    ///
    /// ```
    /// use stencil_mask::bytes::ByteSet;
    /// assert_eq!(ByteSet::range(0x7E, 0x81).iter().collect::<Vec<_>>(), [0x7E, 0x7F, 0x80, 0x81]);
    /// assert!(ByteSet::range(2, 1).is_empty());
    /// ```
    pub const fn range(lo: u8, hi: u8) -> ByteSet {
        let mut set = [0u64; 4];
        let mut b = lo as usize;
        while b <= hi as usize {
            set[b >> 6] |= 1 << (b & 63);
            b += 1;
        }
        ByteSet(set)
    }

    /// The ASCII bytes whose bits `ascii` sets (bit `b` for byte `b`).
    ///
    /// ```
    /// use stencil_mask::bytes::ByteSet;
    /// assert_eq!(ByteSet::from_ascii(1 << b'x' | 1 << b'y'), ByteSet::range(b'x', b'y'));
    /// ```
    pub const fn from_ascii(ascii: u128) -> ByteSet {
        ByteSet([ascii as u64, (ascii >> 64) as u64, 0, 0])
    }

    /// The set's ASCII bytes, as bits (bit `b` for byte `b`).
    #[inline]
    pub const fn ascii(&self) -> u128 {
        self.0[0] as u128 | (self.0[1] as u128) << 64
    }

    /// Whether `b` is in the set.
    #[inline]
    pub const fn contains(&self, b: u8) -> bool {
        self.0[b as usize >> 6] >> (b & 63) & 1 == 1
    }

    /// Adds `b`.
    #[inline]
    pub fn insert(&mut self, b: u8) {
        self.0[b as usize >> 6] |= 1 << (b & 63);
    }

    /// Whether the set has no byte.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    /// Whether the set has a byte that is not ASCII.
    ///
    /// ```
    /// use stencil_mask::bytes::ByteSet;
    /// assert!(!ByteSet::range(0, 0x7F).has_non_ascii() && ByteSet::range(0x80, 0x80).has_non_ascii());
    /// ```
    #[inline]
    pub fn has_non_ascii(&self) -> bool {
        self.0[2] | self.0[3] != 0
    }

    /// Whether the two sets share a byte.
    #[inline]
    pub fn intersects(&self, other: ByteSet) -> bool {
        self.0.iter().zip(other.0).any(|(a, b)| a & b != 0)
    }

    /// Whether every byte of `other` is in the set.
    ///
    /// ```
    /// use stencil_mask::bytes::ByteSet;
    /// let letters = ByteSet::range(b'a', b'z');
    /// assert!(letters.contains_all(ByteSet::range(b'x', b'z')) && !letters.contains_all(ByteSet::range(b'y', b'{')));
    /// ```
    #[inline]
    pub fn contains_all(&self, other: ByteSet) -> bool {
        self.0.iter().zip(other.0).all(|(a, b)| b & !a == 0)
    }

    /// The set without the ASCII bytes whose bits `ascii` sets.
    ///
    /// ```
    /// use stencil_mask::bytes::ByteSet;
    /// let set = ByteSet::range(b'a', b'c').without_ascii(1 << b'b');
    /// assert_eq!(set.iter().collect::<Vec<_>>(), [b'a', b'c']);
    /// ```
    #[inline]
    pub fn without_ascii(&self, ascii: u128) -> ByteSet {
        let [w0, w1, w2, w3] = self.0;
        ByteSet([w0 & !(ascii as u64), w1 & !((ascii >> 64) as u64), w2, w3])
    }

    /// How many bytes the set has.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The set's byte when it has exactly one.
    ///
    /// ```
    /// use stencil_mask::bytes::ByteSet;
    /// assert_eq!(ByteSet::range(b'x', b'x').only(), Some(b'x'));
    /// assert_eq!(ByteSet::range(b'x', b'y').only(), None);
    /// assert_eq!(ByteSet::EMPTY.only(), None);
    /// ```
    #[inline]
    pub fn only(&self) -> Option<u8> {
        if self.len() != 1 {
            return None;
        }
        let i = self.0.iter().position(|&w| w != 0)?;
        Some((i * 64 + self.0[i].trailing_zeros() as usize) as u8)
    }

    /// The set's bytes, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
        (0..=255u8).filter(|&b| self.contains(b))
    }
}

impl BitOr for ByteSet {
    type Output = ByteSet;

    /// The union.
    #[inline]
    fn bitor(mut self, other: ByteSet) -> ByteSet {
        self |= other;
        self
    }
}

impl BitOrAssign for ByteSet {
    #[inline]
    fn bitor_assign(&mut self, other: ByteSet) {
        self.0.iter_mut().zip(other.0).for_each(|(a, b)| *a |= b);
    }
}

impl std::fmt::Debug for ByteSet {
    /// The bytes as ranges: `{0x30-0x39, 0x41}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut ranges = Vec::new();
        for b in self.iter() {
            match ranges.last_mut() {
                Some((_, hi)) if *hi as u16 + 1 == b as u16 => *hi = b,
                _ => ranges.push((b, b)),
            }
        }
        let parts: Vec<String> = ranges
            .iter()
            .map(|&(lo, hi)| if lo == hi { format!("{lo:#04x}") } else { format!("{lo:#04x}-{hi:#04x}") })
            .collect();
        write!(f, "{{{}}}", parts.join(", "))
    }
}

/// The lead bytes of multi-byte UTF-8 sequences, `0xC2..=0xF4`.
pub(crate) const UTF8_LEADS: ByteSet = ByteSet::range(0xC2, 0xF4);

/// The ASCII bytes of plain text (printable ASCII but `"` and `\`), as bits.
pub(crate) const PLAIN_ASCII: u128 = {
    let mut set = 0u128;
    let mut b = b' ';
    while b <= b'~' {
        if b != b'"' && b != b'\\' {
            set |= 1 << b;
        }
        b += 1;
    }
    set
};

/// The bytes a plain-text character may start with: [`PLAIN_ASCII`] and the
/// [`UTF8_LEADS`].
pub(crate) const PLAIN_FIRST_BYTES: ByteSet = {
    let ByteSet([_, _, w2, w3]) = UTF8_LEADS;
    ByteSet([PLAIN_ASCII as u64, (PLAIN_ASCII >> 64) as u64, w2, w3])
};

/// The non-ASCII characters that are not plain text (see [`plain_char`]), in order.
pub(crate) const LINE_SEPARATORS: [char; 2] = ['\u{2028}', '\u{2029}'];

/// Whether `c` is a plain-text character: printable ASCII but `"` and `\`, or any
/// non-ASCII character but the line separators U+2028 and U+2029. Those two are what
/// ECMA-262's `.` leaves out beyond control characters, so a pattern's `.*` (`^.{1,255}$`
/// as an object key, `^.+@.+$`) loops over all plain text like a JSON string's interior,
/// and takes its fast paths; tokens with them (a handful) are walked.
pub(crate) fn plain_char(c: char) -> bool {
    match c {
        '\0'..='\x7f' => PLAIN_ASCII >> c as u32 & 1 == 1,
        _ => !LINE_SEPARATORS.contains(&c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each operation against the same one on a `Vec<bool>` of the 256 bytes.
    #[test]
    fn operations_agree_with_a_plain_set() {
        let sets = [
            ByteSet::EMPTY,
            ByteSet::range(0, 255),
            ByteSet::range(b'0', b'9'),
            ByteSet::range(0xA7, 0xA7),
            ByteSet::range(0x3F, 0x41) | ByteSet::range(0x7F, 0x80) | ByteSet::range(0xBF, 0xC0),
            UTF8_LEADS,
            PLAIN_FIRST_BYTES,
        ];
        let plain = |s: &ByteSet| -> Vec<bool> { (0..=255u8).map(|b| s.contains(b)).collect() };
        for a in &sets {
            let pa = plain(a);
            assert_eq!(a.is_empty(), !pa.contains(&true));
            assert_eq!(a.len(), pa.iter().filter(|&&x| x).count());
            assert_eq!(a.only(), if a.len() == 1 { pa.iter().position(|&x| x).map(|b| b as u8) } else { None });
            assert_eq!(a.has_non_ascii(), pa[0x80..].contains(&true));
            assert_eq!(a.iter().collect::<Vec<_>>(), (0..=255u8).filter(|&b| pa[b as usize]).collect::<Vec<_>>());
            assert_eq!(plain(&ByteSet::from_ascii(a.ascii())), (0..256).map(|i| i < 0x80 && pa[i]).collect::<Vec<_>>());
            for b in &sets {
                let pb = plain(b);
                assert_eq!(plain(&(*a | *b)), (0..256).map(|i| pa[i] || pb[i]).collect::<Vec<_>>());
                assert_eq!(a.intersects(*b), (0..256).any(|i| pa[i] && pb[i]));
                assert_eq!(a.contains_all(*b), (0..256).all(|i| !pb[i] || pa[i]));
                let without = a.without_ascii(b.ascii());
                assert_eq!(plain(&without), (0..256).map(|i| pa[i] && !(i < 0x80 && pb[i])).collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn plain_text() {
        let plain: Vec<u8> = (0..0x80u8).filter(|&b| PLAIN_ASCII >> b & 1 == 1).collect();
        assert_eq!(plain.len(), 95 - 2);
        assert!(plain.iter().all(|&b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\'));
        assert_eq!(UTF8_LEADS.iter().collect::<Vec<_>>(), (0xC2..=0xF4).collect::<Vec<_>>());
        // A plain character's first byte, for every character there is.
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32).filter(|&c| plain_char(c)) {
            let mut buf = [0; 4];
            assert!(PLAIN_FIRST_BYTES.contains(c.encode_utf8(&mut buf).as_bytes()[0]), "{c:?}");
        }
        assert!(plain_char('\u{2027}') && plain_char('é') && plain_char(' '));
        assert!(!plain_char('\u{2028}') && !plain_char('\u{2029}') && !plain_char('"') && !plain_char('\n'));
        assert_eq!(format!("{:?}", ByteSet::range(b'0', b'2') | ByteSet::range(0xF0, 0xF0)), "{0x30-0x32, 0xf0}");
    }
}
