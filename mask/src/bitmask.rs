//! Token masks: one bit per token, packed little-endian into `u32` words (bit `i % 32` of
//! word `i / 32` is token `i`), the layout XGrammar and llguidance use.
//!
//! ```
//! use stencil_mask::bitmask;
//! let mut mask = bitmask::new_mask(70);
//! assert_eq!(mask.len(), 3);
//! bitmask::set(&mut mask, 65);
//! assert!(bitmask::get(&mask, 65) && !bitmask::get(&mask, 64));
//! assert_eq!(bitmask::allowed(&mask).collect::<Vec<_>>(), vec![65]);
//! bitmask::clear(&mut mask, 65);
//! assert_eq!(bitmask::count(&mask), 0);
//! ```

/// ORs the tokens of `other` into `mask` (words past the shorter one's width are left).
///
/// ```
/// use stencil_mask::bitmask;
/// let (mut mask, mut other) = (bitmask::new_mask(40), bitmask::new_mask(40));
/// bitmask::set(&mut mask, 3);
/// bitmask::set(&mut other, 35);
/// bitmask::or_into(&mut mask, &other);
/// assert_eq!(bitmask::allowed(&mask).collect::<Vec<_>>(), vec![3, 35]);
/// ```
pub fn or_into(mask: &mut [u32], other: &[u32]) {
    mask.iter_mut().zip(other).for_each(|(a, b)| *a |= b);
}

/// A zeroed mask for `width` tokens.
pub fn new_mask(width: usize) -> Vec<u32> {
    vec![0; words(width)]
}

/// Words needed for `width` tokens.
pub fn words(width: usize) -> usize {
    width.div_ceil(32)
}

/// Allows `token`.
#[inline]
pub fn set(mask: &mut [u32], token: u32) {
    mask[token as usize >> 5] |= 1 << (token & 31);
}

/// Disallows `token` (nothing when it is past the mask's end).
#[inline]
pub fn clear(mask: &mut [u32], token: u32) {
    if let Some(w) = mask.get_mut(token as usize >> 5) {
        *w &= !(1 << (token & 31));
    }
}

/// Whether `token` is allowed (`false` past the mask's end).
#[inline]
pub fn get(mask: &[u32], token: u32) -> bool {
    mask.get(token as usize >> 5).is_some_and(|w| w >> (token & 31) & 1 == 1)
}

/// The allowed token ids, ascending.
pub fn allowed(mask: &[u32]) -> impl Iterator<Item = u32> + '_ {
    mask.iter().enumerate().flat_map(|(i, &w)| {
        let mut w = w;
        std::iter::from_fn(move || {
            (w != 0).then(|| {
                let bit = w.trailing_zeros();
                w &= w - 1;
                i as u32 * 32 + bit
            })
        })
    })
}

/// Number of allowed tokens.
pub fn count(mask: &[u32]) -> usize {
    nonzero_blocks(mask).map(|(_, b)| b.iter().map(|w| w.count_ones() as usize).sum::<usize>()).sum()
}

/// Words per block in [`nonzero_blocks`].
const BLOCK: usize = 16;

/// The blocks of `mask` with a token, numbered: most of a big vocabulary's mask is zero,
/// and testing a block (an OR over its words) is much cheaper than counting its bits
/// (baseline x86-64 has no popcount instruction).
fn nonzero_blocks(mask: &[u32]) -> impl Iterator<Item = (usize, &[u32])> {
    mask.chunks(BLOCK).enumerate().filter(|(_, b)| b.iter().fold(0, |a, &w| a | w) != 0)
}

/// A set of token ids, stored as a list or as a mask, whichever is smaller to apply.
#[derive(Debug, Clone)]
pub(crate) enum TokenSet {
    List(Vec<u32>),
    Mask(Vec<u32>),
}

impl TokenSet {
    /// The set of a mask's tokens: the mask itself when dense.
    pub fn from_mask(mask: Vec<u32>) -> TokenSet {
        // Counting stops once the set is dense.
        let (mut n, half) = (0, mask.len() / 2);
        for (_, block) in nonzero_blocks(&mask) {
            n += block.iter().map(|w| w.count_ones() as usize).sum::<usize>();
            if n > half {
                break;
            }
        }
        if n > half {
            return TokenSet::Mask(mask);
        }
        let mut ids = Vec::with_capacity(n);
        for (i, block) in nonzero_blocks(&mask) {
            ids.extend(allowed(block).map(|t| t + (i * BLOCK * 32) as u32));
        }
        TokenSet::List(ids)
    }

    /// Overwrites `mask` with the set (words past the set's width become zero).
    pub fn write_into(&self, mask: &mut [u32]) {
        match self {
            TokenSet::List(_) => {
                mask.fill(0);
                self.or_into(mask);
            }
            TokenSet::Mask(m) => {
                let n = m.len().min(mask.len());
                mask[..n].copy_from_slice(&m[..n]);
                mask[n..].fill(0);
            }
        }
    }

    /// ORs the set into `mask`.
    pub fn or_into(&self, mask: &mut [u32]) {
        match self {
            TokenSet::List(ids) => ids.iter().for_each(|&t| set(mask, t)),
            TokenSet::Mask(m) => or_into(mask, m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Token sets and counts agree with a bit-by-bit reading of the mask, on widths that
    /// end inside a block and on sets around the dense threshold (half the words).
    #[test]
    fn token_sets_hold_exactly_the_masks_tokens() {
        let mut seed = 7u64;
        let mut random = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for width in [1, 31, 32, 33, 511, 512, 513, 5000] {
            let words = words(width);
            for n in [0, 1, 2, words / 2, words / 2 + 1, words, width] {
                let mut mask = new_mask(width);
                for _ in 0..n {
                    set(&mut mask, (random() % width as u64) as u32);
                }
                let expected: Vec<u32> = (0..width as u32).filter(|&t| get(&mask, t)).collect();
                assert_eq!(count(&mask), expected.len());
                let mut written = vec![u32::MAX; words];
                match TokenSet::from_mask(mask.clone()) {
                    TokenSet::List(ids) => {
                        assert!(ids.len() * 2 <= words, "a list of {} for {words} words", ids.len());
                        assert_eq!(ids, expected);
                    }
                    TokenSet::Mask(m) => {
                        assert!(expected.len() * 2 > words);
                        assert_eq!(m, mask);
                    }
                }
                TokenSet::from_mask(mask.clone()).write_into(&mut written);
                assert_eq!(written, mask, "width {width}, {n} tokens set");
            }
        }
    }
}
