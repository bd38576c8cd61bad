//! The seeded generators the tests draw from. [`SplitMix64`] is the one to use for new
//! tests (it is `stencil-grammar`'s, which the random grammars and strings come from);
//! [`xorshift`] is the one the committed random vocabularies and the oracle's walks were
//! drawn with, kept so that they stay the same tokens and the same walks.

pub use stencil_grammar::random::SplitMix64;

/// A xorshift generator from a non-zero `state`.
pub fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}
