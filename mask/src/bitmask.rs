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

/// A zeroed mask for `width` tokens.
pub fn new_mask(width: usize) -> Vec<u32> {
    vec![0; words(width)]
}

/// Words needed for `width` tokens.
pub fn words(width: usize) -> usize {
    width.div_ceil(32)
}

#[inline]
pub fn set(mask: &mut [u32], token: u32) {
    mask[token as usize >> 5] |= 1 << (token & 31);
}

#[inline]
pub fn clear(mask: &mut [u32], token: u32) {
    if let Some(w) = mask.get_mut(token as usize >> 5) {
        *w &= !(1 << (token & 31));
    }
}

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
    // Most words of a big vocabulary's mask are zero, and without a popcount instruction
    // (baseline x86-64) counting a word's bits is a dozen operations.
    mask.iter().filter(|&&w| w != 0).map(|w| w.count_ones() as usize).sum()
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
        // A mask once it has more tokens than half its words: counting stops there.
        let mut n = 0;
        for &w in mask.iter().filter(|&&w| w != 0) {
            n += w.count_ones() as usize;
            if n > mask.len() / 2 {
                return TokenSet::Mask(mask);
            }
        }
        TokenSet::List(allowed(&mask).collect())
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
            TokenSet::Mask(m) => mask.iter_mut().zip(m).for_each(|(a, b)| *a |= b),
        }
    }
}
