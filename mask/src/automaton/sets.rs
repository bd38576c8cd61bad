//! Interned sets of NFA states for the subset construction: all sets in one arena, found
//! again by hash, so a new automaton state costs no allocation of its own.

use super::rows::Rows;
use rustc_hash::FxHashMap;
use std::hash::{BuildHasher, BuildHasherDefault};

const NONE: u32 = u32::MAX;

/// Distinct sets, numbered in the order they were first interned.
///
/// ```text
/// intern([1, 4]) = (0, true); intern([2]) = (1, true); intern([1, 4]) = (0, false)
/// ```
#[derive(Default)]
pub(crate) struct StateSets {
    /// Set `i` is `sets[i]`.
    sets: Rows<u32>,
    /// Hash → the last set interned with that hash; earlier ones via `same_hash`.
    by_hash: FxHashMap<u64, u32>,
    same_hash: Vec<u32>,
}

impl StateSets {
    /// Forgets every set, keeping the memory.
    pub fn clear(&mut self) {
        self.sets.clear();
        self.by_hash.clear();
        self.same_hash.clear();
    }

    pub fn len(&self) -> usize {
        self.sets.len()
    }

    pub fn get(&self, id: u32) -> &[u32] {
        self.sets.get(id as usize)
    }

    /// The id of `set`, and whether it is new.
    pub fn intern(&mut self, set: &[u32]) -> (u32, bool) {
        self.intern_hashed(set, BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(set))
    }

    fn intern_hashed(&mut self, set: &[u32], hash: u64) -> (u32, bool) {
        let last = self.by_hash.get(&hash).copied().unwrap_or(NONE);
        let mut id = last;
        while id != NONE {
            if self.get(id) == set {
                return (id, false);
            }
            id = self.same_hash[id as usize];
        }
        let id = self.len() as u32;
        self.sets.push_row(set.iter().copied());
        self.same_hash.push(last);
        self.by_hash.insert(hash, id);
        (id, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_are_numbered_once_in_order() {
        let mut sets = StateSets::default();
        assert_eq!(sets.intern(&[1, 4]), (0, true));
        assert_eq!(sets.intern(&[]), (1, true));
        assert_eq!(sets.intern(&[2]), (2, true));
        assert_eq!(sets.intern(&[1, 4]), (0, false));
        assert_eq!(sets.intern(&[]), (1, false));
        assert_eq!(sets.get(0), &[1, 4]);
        assert_eq!(sets.get(1), &[] as &[u32]);
        assert_eq!(sets.get(2), &[2]);
    }

    /// Sets that share a hash still get their own ids (the chain is followed).
    #[test]
    fn colliding_hashes_are_told_apart() {
        let mut sets = StateSets::default();
        for i in 0..50u32 {
            assert_eq!(sets.intern_hashed(&[i, 7], 0), (i, true));
        }
        for i in 0..50u32 {
            assert_eq!(sets.intern_hashed(&[i, 7], 0), (i, false));
            assert_eq!(sets.get(i), &[i, 7]);
        }
    }
}
