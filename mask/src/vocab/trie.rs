//! The vocabulary's token index: a byte trie of tokens, flattened in depth-first preorder
//! so that a whole subtree is a contiguous range of nodes (a walk that rejects a byte
//! skips the subtree in O(1)), and the text tokens split for the mask's fast paths
//! ([`TextTokens`], built once per [`Vocabulary`]).

use super::Vocabulary;
use crate::bytes::{plain_char, ByteSet, LINE_SEPARATORS};

/// One trie node: the byte on the edge into it, its depth, where its subtree ends, and the
/// tokens whose bytes end here.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Node {
    pub byte: u8,
    /// Every edge of the subtree (this node's included) is an ASCII byte.
    pub ascii: bool,
    /// The subtree's longest path, this node's edge included (saturating).
    pub height: u16,
    /// Every path of the subtree, read from this node's edge on, is well-formed UTF-8 or
    /// a prefix of it (from a character boundary).
    pub utf8: bool,
    pub depth: u32,
    pub subtree_end: u32,
    tokens_start: u32,
    tokens_end: u32,
}

/// Tokens (or token suffixes) by their bytes. Node 0 is the root (the empty string).
#[derive(Clone, Debug)]
pub(crate) struct TokenTrie {
    pub nodes: Vec<Node>,
    token_ids: Vec<u32>,
    /// The longest key's length.
    pub max_depth: usize,
    /// Per node: the ASCII bytes on the edges of its subtree (its own edge included).
    pub subtree_ascii: Vec<u128>,
    /// The root's children, `(byte, node)` in order: a walk that takes few first bytes
    /// finds them here instead of visiting every first byte's node, hundreds spread
    /// over the whole trie in a big vocabulary.
    pub root_children: Vec<(u8, u32)>,
}

impl TokenTrie {
    /// A trie of `(bytes, id)` pairs; one id may appear under several byte strings and
    /// one byte string may carry several ids.
    pub fn build<'a>(pairs: impl IntoIterator<Item = (&'a [u8], u32)>) -> Self {
        let mut pairs: Vec<(&[u8], u32)> = pairs.into_iter().collect();
        pairs.sort_unstable();
        pairs.dedup();
        let root = Node {
            byte: 0,
            ascii: false,
            height: 0,
            utf8: false,
            depth: 0,
            subtree_end: 0,
            tokens_start: 0,
            tokens_end: 0,
        };
        let mut nodes = vec![root];
        let mut token_ids = Vec::with_capacity(pairs.len());
        // `path[d]` is the node at depth d on the path to the previous key.
        let mut path: Vec<u32> = vec![0];
        let mut prev: &[u8] = &[];
        for (bytes, id) in pairs {
            let common = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            while path.len() > common + 1 {
                let n = path.pop().unwrap();
                nodes[n as usize].subtree_end = nodes.len() as u32;
            }
            for (d, &b) in bytes.iter().enumerate().skip(common) {
                let t = token_ids.len() as u32;
                nodes.push(Node {
                    byte: b,
                    ascii: false,
                    height: 1,
                    utf8: false,
                    depth: d as u32 + 1,
                    subtree_end: 0,
                    tokens_start: t,
                    tokens_end: t,
                });
                path.push(nodes.len() as u32 - 1);
            }
            let last = *path.last().unwrap() as usize;
            if nodes[last].tokens_start == nodes[last].tokens_end {
                nodes[last].tokens_start = token_ids.len() as u32;
                nodes[last].tokens_end = nodes[last].tokens_start;
            }
            token_ids.push(id);
            nodes[last].tokens_end += 1;
            prev = bytes;
        }
        while let Some(n) = path.pop() {
            nodes[n as usize].subtree_end = nodes.len() as u32;
        }
        let max_depth = nodes.iter().map(|n| n.depth as usize).max().unwrap_or(0);
        // Children come after their parent: fill from the end.
        let mut subtree_ascii = vec![0u128; nodes.len()];
        for n in (1..nodes.len()).rev() {
            let b = nodes[n].byte;
            let (mut bytes, mut ascii, mut below) = (if b < 0x80 { 1u128 << b } else { 0 }, b < 0x80, 0u16);
            for child in children(&nodes, n) {
                bytes |= subtree_ascii[child];
                ascii &= nodes[child].ascii;
                below = below.max(nodes[child].height);
            }
            subtree_ascii[n] = bytes;
            nodes[n].ascii = ascii;
            nodes[n].height = below.saturating_add(1);
            nodes[n].utf8 = utf8_from(&nodes, n);
        }
        let root_children = children(&nodes, 0).map(|c| (nodes[c].byte, c as u32)).collect();
        TokenTrie { nodes, token_ids, max_depth, subtree_ascii, root_children }
    }

    /// The ids whose bytes end at node `n`.
    #[inline]
    pub fn tokens(&self, n: usize) -> &[u32] {
        let node = &self.nodes[n];
        &self.token_ids[node.tokens_start as usize..node.tokens_end as usize]
    }

    /// The ids in the subtree of node `n` (including `n`): one contiguous run, as ids are
    /// stored in depth-first order.
    #[inline]
    pub fn subtree_ids(&self, n: usize) -> &[u32] {
        let end = self
            .nodes
            .get(self.nodes[n].subtree_end as usize)
            .map_or(self.token_ids.len(), |m| m.tokens_start as usize);
        &self.token_ids[self.nodes[n].tokens_start as usize..end]
    }

    /// The children of node `n`.
    pub fn children(&self, n: usize) -> impl Iterator<Item = usize> + '_ {
        children(&self.nodes, n)
    }

    /// The node reached from the root by `bytes`, if any.
    pub fn find(&self, bytes: &[u8]) -> Option<usize> {
        let mut n = 0usize;
        for &b in bytes {
            let mut child = n + 1;
            let end = self.nodes[n].subtree_end as usize;
            loop {
                if child >= end {
                    return None;
                }
                if self.nodes[child].byte == b {
                    break;
                }
                child = self.nodes[child].subtree_end as usize;
            }
            n = child;
        }
        Some(n)
    }
}

/// The vocabulary's text tokens, indexed for the mask walk: all of them in one trie, and
/// split by whether they are *plain text*: printable ASCII but `"` and `\`, and non-ASCII
/// UTF-8 from a character boundary (the last character may be cut short) but the line
/// separators U+2028 and U+2029 ([`plain_char`]). Inside a JSON
/// string, or any state whose reach covers all of that, every plain token is allowed whole:
/// the walk then sets them at once and visits only the rest (llguidance's "slicer").
#[derive(Debug)]
pub(crate) struct TextTokens {
    pub all: TokenTrie,
    /// The plain tokens, as a mask.
    pub plain: Vec<u32>,
    /// The plain tokens by first byte.
    plain_by_first: Vec<Vec<u32>>,
    /// The longest plain token's length, and its characters.
    pub plain_max_len: u32,
    pub plain_max_chars: u32,
    /// By `n < PLAIN_UPTO`: the plain tokens of at most `n` characters (a character cut
    /// short counts), as a mask.
    pub plain_upto: Vec<Vec<u32>>,
    /// The plain tokens in none of those masks.
    pub long_plain: TokenTrie,
    /// The other text tokens.
    pub rest: TokenTrie,
    /// The text tokens, longest first (for [`TextTokens::run_split`]).
    by_len: Vec<u32>,
    /// The other text tokens from their first byte that is not plain text on (after the
    /// longest plain prefix), for a loop over all plain text (a string's interior), which
    /// takes that prefix and stays where it is; `rest_cut_at`: where each is cut.
    pub rest_cut: TokenTrie,
    pub rest_cut_at: rustc_hash::FxHashMap<u32, u32>,
    /// All text tokens (but an empty one, which no walk takes), as a mask.
    all_mask: Vec<u32>,
    /// Per ASCII byte, the tokens that have it, as a mask, then (at [`NON_ASCII`]) the
    /// tokens with a non-ASCII byte (for [`TextTokens::run_split`]).
    with_byte: Vec<Vec<u32>>,
    /// How many tokens each of those masks has.
    with_counts: Vec<usize>,
    /// [`RunSplit::within`] masks made so far, by run bytes.
    within: std::sync::Mutex<rustc_hash::FxHashMap<u128, std::sync::Arc<Vec<u32>>>>,
    /// By `n < PLAIN_UPTO`, made when first asked for: the plain tokens of more than `n`
    /// characters, from their `n`-th character on (see [`TextTokens::plain_after`]).
    plain_after: [std::sync::OnceLock<TokenTrie>; PLAIN_UPTO],
    /// The same, of `long_plain`'s tokens only.
    long_plain_after: [std::sync::OnceLock<TokenTrie>; PLAIN_UPTO],
    /// The text tokens that are well-formed UTF-8 from a character boundary (the last
    /// character may be cut short), as a mask: what a loop over every character takes.
    utf8: Vec<u32>,
    /// [`TextTokens::loop_split`]s made so far, by the ASCII bytes that leave the loop.
    loops: std::sync::Mutex<rustc_hash::FxHashMap<u128, Option<std::sync::Arc<LoopSplit>>>>,
}

/// The text tokens as a loop over every character but a few ASCII bytes sees them (see
/// [`TextTokens::loop_split`]).
#[derive(Debug)]
pub(crate) struct LoopSplit {
    /// The UTF-8 tokens without any of those bytes, as a mask: the loop takes each whole.
    pub inside: Vec<u32>,
    /// The other text tokens, to walk.
    pub rest: TokenTrie,
}

/// How many [`TextTokens::loop_split`]s a vocabulary keeps (a grammar's free text leaves
/// its loop at the first bytes of its few end markers).
const MAX_LOOPS_KEPT: usize = 32;

/// The text tokens as a run over a set of ASCII bytes sees them (see
/// [`TextTokens::run_split`]).
pub(crate) struct RunSplit {
    /// The tokens spelled with the run's bytes only that the run takes whole, as a mask.
    pub within: std::sync::Arc<Vec<u32>>,
    /// The tokens whose first byte outside the run, at offset `k`, is one the run's
    /// state there takes, or that outlast the run (`k`: where it ends): by `k`, their
    /// bytes from `k` on.
    pub cut: Vec<(u32, TokenTrie)>,
    /// Where each of `cut`'s tokens is cut.
    pub cut_at: rustc_hash::FxHashMap<u32, u32>,
}

/// How many [`RunSplit::within`] masks a vocabulary keeps (a pattern's class recurs at
/// every counted position of its string, and real schemas repeat a few classes).
const MAX_WITHIN_KEPT: usize = 64;

/// Where [`TextTokens`]'s per-byte masks keep the one of every non-ASCII byte.
const NON_ASCII: usize = 0x80;

/// More tokens than this to cut, and a run's masks are walked as any other.
const MAX_CUT_TOKENS: usize = 16_384;

/// How many `TextTokens::plain_upto` masks there are: plain tokens longer than that are
/// rare, and a count with more left is walked.
const PLAIN_UPTO: usize = 24;

/// Where the characters of `bytes` start: the bytes that do not continue one (a character
/// cut short at the end counts).
fn char_starts(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    bytes.iter().enumerate().filter(|(_, &b)| b & 0xC0 != 0x80).map(|(i, _)| i)
}

impl TextTokens {
    /// Indexes `(bytes, id)` of the text tokens; `mask_width` is the masks' width.
    pub fn new(tokens: &[(&[u8], u32)], mask_width: usize) -> Self {
        let mut plain = crate::bitmask::new_mask(mask_width);
        let mut plain_by_first = vec![Vec::new(); 256];
        let (mut plain_max_len, mut plain_max_chars) = (0, 0);
        let (mut rest, mut long_plain) = (Vec::new(), Vec::new());
        let (mut rest_cut, mut rest_cut_at) = (Vec::new(), rustc_hash::FxHashMap::default());
        let mut plain_upto = vec![crate::bitmask::new_mask(mask_width); PLAIN_UPTO];
        let mut all_mask = crate::bitmask::new_mask(mask_width);
        let mut with_byte = vec![crate::bitmask::new_mask(mask_width); NON_ASCII + 1];
        let mut utf8 = crate::bitmask::new_mask(mask_width);
        for &(bytes, id) in tokens {
            if !bytes.is_empty() {
                crate::bitmask::set(&mut all_mask, id);
                if utf8_text(bytes).is_some() {
                    crate::bitmask::set(&mut utf8, id);
                }
            }
            for &b in bytes {
                crate::bitmask::set(&mut with_byte[(b as usize).min(NON_ASCII)], id);
            }
            if is_plain_text(bytes) {
                crate::bitmask::set(&mut plain, id);
                // Characters: the bytes that do not continue one.
                let chars = char_starts(bytes).count();
                plain_upto.iter_mut().skip(chars).for_each(|m| crate::bitmask::set(m, id));
                if chars >= PLAIN_UPTO {
                    long_plain.push((bytes, id));
                }
                if let Some(&b) = bytes.first() {
                    plain_by_first[b as usize].push(id);
                }
                plain_max_len = plain_max_len.max(bytes.len() as u32);
                plain_max_chars = plain_max_chars.max(chars as u32);
            } else {
                rest.push((bytes, id));
                let k = plain_prefix_len(bytes);
                rest_cut.push((&bytes[k..], id));
                rest_cut_at.insert(id, k as u32);
            }
        }
        TextTokens {
            all: TokenTrie::build(tokens.iter().copied()),
            plain,
            plain_by_first,
            plain_max_len,
            plain_max_chars,
            plain_upto,
            long_plain: TokenTrie::build(long_plain),
            rest: TokenTrie::build(rest),
            by_len: {
                let mut by_len: Vec<(usize, u32)> = tokens.iter().map(|&(b, id)| (b.len(), id)).collect();
                by_len.sort_unstable_by(|x, y| y.cmp(x));
                by_len.into_iter().map(|(_, id)| id).collect()
            },
            rest_cut: TokenTrie::build(rest_cut),
            rest_cut_at,
            all_mask,
            with_counts: with_byte.iter().map(|m| crate::bitmask::count(m)).collect(),
            with_byte,
            within: Default::default(),
            plain_after: std::array::from_fn(|_| std::sync::OnceLock::new()),
            long_plain_after: std::array::from_fn(|_| std::sync::OnceLock::new()),
            utf8,
            loops: Default::default(),
        }
    }

    /// The text tokens split for a loop over every character but the ASCII bytes `leave`
    /// (free text that stops at the first byte of an end marker: `any_text` with
    /// `excludes`): the UTF-8 tokens without those bytes, which the loop takes whole, and
    /// a trie of the others. `None` when the others are too many for the split to pay.
    /// Made once per byte set and kept.
    pub fn loop_split(&self, vocab: &Vocabulary, leave: u128) -> Option<std::sync::Arc<LoopSplit>> {
        let mut kept = self.loops.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(split) = kept.get(&leave) {
            return split.clone();
        }
        let mut inside = self.utf8.clone();
        for b in (0..NON_ASCII).filter(|&b| leave >> b & 1 == 1) {
            inside.iter_mut().zip(&self.with_byte[b]).for_each(|(w, x)| *w &= !x);
        }
        let others = crate::bitmask::count(&self.all_mask) - crate::bitmask::count(&inside);
        let split = (others <= MAX_CUT_TOKENS).then(|| {
            let rest = self.all_mask.iter().zip(&inside).map(|(a, i)| a & !i).collect::<Vec<u32>>();
            let rest = TokenTrie::build(crate::bitmask::allowed(&rest).map(|id| (vocab.token_bytes(id), id)));
            std::sync::Arc::new(LoopSplit { inside, rest })
        });
        if kept.len() < MAX_LOOPS_KEPT {
            kept.insert(leave, split.clone());
        }
        split
    }

    /// The plain tokens of more than `n < PLAIN_UPTO` characters, each from its `n`-th
    /// character on (what goes on in a caller after a count's end), as a trie; only those
    /// of more than `PLAIN_UPTO - 1` characters (`long_plain`'s) when `long`. Made once per
    /// vocabulary and `n`, on first use.
    pub fn plain_after(&self, n: usize, long: bool, vocab: &Vocabulary) -> &TokenTrie {
        let (cache, fewer) = if long { (&self.long_plain_after, PLAIN_UPTO - 1) } else { (&self.plain_after, n) };
        cache[n].get_or_init(|| {
            let longer =
                crate::bitmask::allowed(&self.plain).filter(|&id| !crate::bitmask::get(&self.plain_upto[fewer], id));
            TokenTrie::build(longer.map(|id| {
                let bytes = vocab.token_bytes(id);
                let at = char_starts(bytes).nth(n).unwrap_or(bytes.len());
                (&bytes[at..], id)
            }))
        })
    }

    /// The text tokens split by a run over the ASCII bytes `run` that lasts `len` of them
    /// (`u32::MAX`: for ever; see [`RunSplit`]): `takes(k, b)` says whether the run's
    /// state after `k < len` of its bytes takes byte `b`, some state of it takes the
    /// bytes of `next` besides the run's, and `None` when too many tokens would be cut.
    ///
    /// The tokens spelled with `run` bytes come from per-byte masks (no token is looked
    /// at), the ones to cut from the masks of `next`'s bytes (a string's closing quote is
    /// in few tokens) and from the tokens longer than the run (few, for a long one).
    pub fn run_split(
        &self,
        vocab: &Vocabulary,
        run: u128,
        len: u32,
        next: &ByteSet,
        takes: impl Fn(usize, u8) -> bool,
    ) -> Option<RunSplit> {
        let in_run = |b: u8| b < 0x80 && run >> b & 1 == 1;
        let n_longer = self.by_len.partition_point(|&id| vocab.token_bytes(id).len() > len as usize);
        let longer = || self.by_len[..n_longer].iter().copied();
        let mut masks: Vec<usize> = (0..NON_ASCII).filter(|&b| next.contains(b as u8)).collect();
        if next.has_non_ascii() {
            masks.push(NON_ASCII);
        }
        // Counted first: too many, and nothing is looked at.
        if n_longer + masks.iter().map(|&m| self.with_counts[m]).sum::<usize>() > MAX_CUT_TOKENS {
            return None;
        }
        let candidates = masks.into_iter().flat_map(|m| crate::bitmask::allowed(&self.with_byte[m])).chain(longer());
        let (mut by_offset, mut cut_at) = (Vec::<(u32, Vec<(&[u8], u32)>)>::new(), rustc_hash::FxHashMap::default());
        for id in candidates {
            let bytes = vocab.token_bytes(id);
            // Cut at the first other byte when the run's state there takes it, or where
            // the run ends.
            let k = match bytes.iter().position(|&b| !in_run(b)) {
                Some(k) if k < len as usize && takes(k, bytes[k]) => k,
                Some(k) if k < len as usize => continue,
                _ if bytes.len() > len as usize => len as usize,
                _ => continue,
            };
            if cut_at.insert(id, k as u32).is_some() {
                continue;
            }
            match by_offset.iter_mut().find(|(at, _)| *at == k as u32) {
                Some((_, keys)) => keys.push((&bytes[k..], id)),
                None => by_offset.push((k as u32, vec![(&bytes[k..], id)])),
            }
        }
        let cut = by_offset.into_iter().map(|(k, keys)| (k, TokenTrie::build(keys))).collect();
        let within = self.within_run(run);
        let within = match n_longer {
            0 => within,
            // Spelled with the run's bytes but longer than the run: cut above.
            _ => {
                let mut w = within.as_ref().clone();
                longer().for_each(|id| crate::bitmask::clear(&mut w, id));
                std::sync::Arc::new(w)
            }
        };
        Some(RunSplit { within, cut, cut_at })
    }

    /// The text tokens spelled with `run` bytes only (ASCII), as a mask: all of them but
    /// those with another byte.
    fn within_run(&self, run: u128) -> std::sync::Arc<Vec<u32>> {
        let kept = || self.within.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = kept().get(&run) {
            return m.clone();
        }
        let mut within = self.all_mask.clone();
        for m in (0..=NON_ASCII).filter(|&b| b == NON_ASCII || run >> b & 1 == 0) {
            within.iter_mut().zip(&self.with_byte[m]).for_each(|(w, x)| *w &= !x);
        }
        let within = std::sync::Arc::new(within);
        let mut kept = kept();
        if kept.len() < MAX_WITHIN_KEPT {
            kept.insert(run, within.clone());
        }
        within
    }

    /// The plain tokens whose first byte is `b`.
    pub fn plain_by_first_byte(&self, b: u8) -> impl Iterator<Item = u32> + '_ {
        self.plain_by_first[b as usize].iter().copied()
    }
}

/// The length of the longest prefix of `bytes` that is whole plain-text characters (see
/// [`TextTokens`]).
fn plain_prefix_len(bytes: &[u8]) -> usize {
    let valid = match std::str::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).expect("valid up to there"),
    };
    valid.char_indices().find(|&(_, c)| !plain_char(c)).map_or(valid.len(), |(i, _)| i)
}

/// See [`TextTokens`].
fn is_plain_text(bytes: &[u8]) -> bool {
    utf8_text(bytes).is_some_and(|valid| valid.chars().all(plain_char))
}

/// `bytes` up to a last character cut short, when they are well-formed UTF-8 so far.
fn utf8_text(bytes: &[u8]) -> Option<&str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Some(s),
        Err(e) if e.error_len().is_none() => {
            Some(std::str::from_utf8(&bytes[..e.valid_up_to()]).expect("valid up to there"))
        }
        Err(_) => None,
    }
}

/// The children of node `m` (each child's subtree ends where the next child starts).
fn children(nodes: &[Node], m: usize) -> impl Iterator<Item = usize> + '_ {
    let end = nodes[m].subtree_end as usize;
    std::iter::successors((m + 1 < end).then_some(m + 1), move |&c| {
        let next = nodes[c].subtree_end as usize;
        (next < end).then_some(next)
    })
}

/// Whether every path from node `n`'s edge down is well-formed UTF-8 or a prefix of it,
/// without the two non-ASCII characters that are not plain text (see [`plain_char`]),
/// given that the subtrees of `n`'s descendants already know (children come later in
/// preorder, so they are filled first).
fn utf8_from(nodes: &[Node], n: usize) -> bool {
    let children = |m: usize| children(nodes, m);
    // The continuation bytes a lead byte needs: the second byte's range, and how many.
    let (second, count) = match nodes[n].byte {
        0x00..=0x7F => return children(n).all(|c| nodes[c].utf8),
        0xC2..=0xDF => ((0x80, 0xBF), 1),
        0xE0 => ((0xA0, 0xBF), 2),
        0xE1..=0xEC | 0xEE..=0xEF => ((0x80, 0xBF), 2),
        0xED => ((0x80, 0x9F), 2),
        0xF0 => ((0x90, 0xBF), 3),
        0xF1..=0xF3 => ((0x80, 0xBF), 3),
        0xF4 => ((0x80, 0x8F), 3),
        _ => return false,
    };
    // The line separators are well-formed but not plain text.
    let separator = LINE_SEPARATORS.iter().any(|c| {
        let mut buf = [0; 4];
        let &[lead, second, third] = c.encode_utf8(&mut buf).as_bytes() else { unreachable!("3-byte characters") };
        nodes[n].byte == lead
            && children(n).filter(|&c| nodes[c].byte == second).any(|c| children(c).any(|g| nodes[g].byte == third))
    });
    if separator {
        return false;
    }
    // Walk the character's remaining bytes; past them, the children must know.
    let mut level = vec![n];
    for i in 0..count {
        let (lo, hi) = if i == 0 { second } else { (0x80, 0xBF) };
        let mut next = Vec::new();
        for &m in &level {
            for c in children(m) {
                if !(lo..=hi).contains(&nodes[c].byte) {
                    return false;
                }
                next.push(c);
            }
        }
        level = next;
    }
    level.iter().all(|&m| children(m).all(|c| nodes[c].utf8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preorder_layout_and_lookup() {
        let words: [&[u8]; 5] = [b"ab", b"a", b"b", b"abc", b"ab"];
        let t = TokenTrie::build(words.iter().enumerate().map(|(i, w)| (*w, i as u32)));
        let ab = t.find(b"ab").unwrap();
        let mut ids = t.tokens(ab).to_vec();
        ids.sort();
        assert_eq!(ids, vec![0, 4]);
        assert_eq!(t.tokens(t.find(b"a").unwrap()), &[1]);
        assert!(t.find(b"ac").is_none());
        let mut sub: Vec<u32> = t.subtree_ids(t.find(b"a").unwrap()).to_vec();
        sub.sort();
        assert_eq!(sub, vec![0, 1, 3, 4]);
        let mut run = t.subtree_ids(t.find(b"a").unwrap()).to_vec();
        run.sort();
        assert_eq!(run, sub);
        let a = t.find(b"a").unwrap();
        assert_eq!(t.subtree_ascii[a], (1 << b'a') | (1 << b'b') | (1 << b'c'));
        assert!(t.nodes[a].ascii);
        assert_eq!(t.nodes[a].height, 3);
        let u = TokenTrie::build([("é".as_bytes(), 0), (b"e".as_slice(), 1)]);
        assert!(!u.nodes[u.find("é".as_bytes()).unwrap()].ascii);
        assert!(!u.nodes[u.find(&"é".as_bytes()[..1]).unwrap()].ascii);
        assert!(u.nodes[u.find(b"e").unwrap()].ascii);
        assert!(u.nodes[u.find(&"é".as_bytes()[..1]).unwrap()].utf8);
        let bad = TokenTrie::build([
            (&[0xC3u8, 0x41][..], 0),
            (&[0x80u8][..], 1),
            (&[0x41u8, 0xE2, 0x82, 0xAC, 0x41][..], 2),
        ]);
        assert!(!bad.nodes[bad.find(&[0xC3]).unwrap()].utf8);
        assert!(!bad.nodes[bad.find(&[0x80]).unwrap()].utf8);
        assert!(bad.nodes[bad.find(&[0x41]).unwrap()].utf8);
        assert_eq!(t.nodes[0].subtree_end as usize, t.nodes.len());
        // A line separator is well-formed but not plain text: its subtree is walked.
        let ls = TokenTrie::build([("a\u{2028}".as_bytes(), 0), ("b\u{2027}".as_bytes(), 1)]);
        assert!(!ls.nodes[ls.find(b"a").unwrap()].utf8);
        assert!(ls.nodes[ls.find(b"b").unwrap()].utf8);
    }

    #[test]
    fn plain_text_tokens() {
        let e = "é".as_bytes();
        let tokens: [(&[u8], u32); 9] = [
            (b"abc", 0),
            (b"a\"", 1),
            (b"\\n", 2),
            (e, 3),
            (&e[..1], 4),  // cut short inside its character: plain
            (&e[1..], 5),  // starts inside one: not
            (b"\n", 6),    // a control character
            (b"x\x7f", 7), // DEL is not printable
            (b" ~!", 8),
        ];
        let text = TextTokens::new(&tokens, 10);
        let plain: Vec<u32> = (0..9).filter(|&t| crate::bitmask::get(&text.plain, t)).collect();
        assert_eq!(plain, [0, 3, 4, 8]);
        // ECMA-262's `.` excludes U+2028 and U+2029: not plain text, cut where they start
        // (see `bytes::plain_char`).
        assert!(!is_plain_text("ab\u{2029}".as_bytes()));
        assert_eq!(plain_prefix_len("ab\u{2028}c".as_bytes()), 2);
        assert_eq!(text.plain_max_len, 3);
        let mut rest: Vec<u32> = text.rest.subtree_ids(0).to_vec();
        rest.sort();
        assert_eq!(rest, [1, 2, 5, 6, 7]);
    }
}
