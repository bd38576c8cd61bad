//! Key languages of several patterns at once, exactly: the product automaton of full-match
//! character languages (`regex-syntax` HIRs without look-arounds, as
//! [`crate::ecma::full_match_hir`] gives them), one DFA whose every state knows which of the
//! languages the string read so far is in. Intersection, complement and difference are all
//! "the states whose membership vector is this one": `extra.rs` asks for the keys of each
//! combination of `patternProperties` patterns (and `propertyNames`), less the declared
//! names, and writes them out as the minimal DFA of those states with the names' trie in
//! front ([`Product::without_words`]): one grammar rule per state, which the engine builds
//! back into one automaton (no regex in between: state elimination is cubic, and its regex
//! of a complement is far bigger than the DFA).
//!
//! The DFA reads characters, not bytes: the columns are the intervals between every bound
//! of every class and literal of the languages (the alphabet's partition), so each interval
//! is wholly in or out of each class and a label is a union of intervals.
//!
//! Every step has a limit ([`KeyLimits`]); past one the answer is `None` and the caller
//! keeps its narrower form (with its warning), never a wider one.

use regex_syntax::hir::{Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind};
use rustc_hash::FxHashMap as HashMap;

/// The sizes that bound one product and its languages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyLimits {
    /// NFA states of all the languages together (bounded repetitions are unrolled).
    pub(crate) nfa_states: usize,
    /// Intervals of the alphabet's partition.
    pub(crate) columns: usize,
    /// DFA states of the product.
    pub(crate) dfa_states: usize,
}

impl Default for KeyLimits {
    fn default() -> Self {
        KeyLimits { nfa_states: 20_000, columns: 2_000, dfa_states: 2_000 }
    }
}

/// The product DFA of some full-match languages: complete (the strings in none of them have
/// a state too); state 0 is the start.
#[derive(Debug)]
pub(crate) struct Product {
    /// The alphabet's partition: disjoint intervals covering every character, in order.
    columns: Vec<(char, char)>,
    /// `next[s * columns.len() + c]`: the state after reading a character of column `c`.
    next: Vec<u32>,
    /// `member[s][i]`: whether the strings ending in `s` are in language `i`.
    member: Vec<Vec<bool>>,
}

const DEAD: u32 = u32::MAX;

impl Product {
    /// The product of `langs`; `None` past a limit or on a HIR this does not handle.
    pub(crate) fn new(langs: &[&Hir], limits: KeyLimits) -> Option<Product> {
        let columns = partition(langs, limits.columns)?;
        let mut nfa = Nfa { states: Vec::new(), columns: &columns, max: limits.nfa_states };
        let start = nfa.push()?;
        for (i, h) in langs.iter().enumerate() {
            let (s, e) = nfa.build(h)?;
            nfa.states[start as usize].eps.push(s);
            nfa.states[e as usize].accept = Some(i);
        }
        let ncols = columns.len();
        let mut ids: HashMap<Vec<u32>, u32> = HashMap::default();
        let mut sets: Vec<Vec<u32>> = Vec::new();
        let mut marks = Marks::default();
        let first = nfa.closure(vec![start], &mut marks);
        ids.insert(first.clone(), 0);
        sets.push(first);
        let mut next: Vec<u32> = Vec::new();
        let mut member: Vec<Vec<bool>> = Vec::new();
        let mut buckets: Vec<Vec<u32>> = vec![Vec::new(); ncols];
        let mut previous_moves: Vec<u32> = Vec::new();
        let mut s = 0;
        while s < sets.len() {
            let set = std::mem::take(&mut sets[s]);
            next.reserve(ncols);
            let mut m = vec![false; langs.len()];
            for &q in &set {
                let st = &nfa.states[q as usize];
                if let Some(i) = st.accept {
                    m[i] = true;
                }
                if let Some((cols, t)) = &st.class {
                    for &c in cols {
                        buckets[c as usize].push(*t);
                    }
                }
            }
            member.push(m);
            // An empty target set is a state too (the strings in none of the languages).
            // Neighbouring columns often move alike (the pieces of one class): their
            // target is looked up once.
            let mut previous: Option<u32> = None;
            for b in buckets.iter_mut() {
                if let Some(id) = previous.filter(|_| *b == previous_moves) {
                    next.push(id);
                    b.clear();
                    continue;
                }
                let target = nfa.closure(b.clone(), &mut marks);
                let id = match ids.get(&target) {
                    Some(&id) => id,
                    None => {
                        if ids.len() >= limits.dfa_states {
                            return None;
                        }
                        let id = ids.len() as u32;
                        ids.insert(target.clone(), id);
                        sets.push(target);
                        id
                    }
                };
                next.push(id);
                previous = Some(id);
                std::mem::swap(&mut previous_moves, b);
                b.clear();
            }
            s += 1;
        }
        Some(Product { columns, next, member })
    }

    /// The number of states.
    pub(crate) fn len(&self) -> usize {
        self.member.len()
    }

    /// Which languages the strings ending in state `s` belong to.
    pub(crate) fn member(&self, s: usize) -> &[bool] {
        &self.member[s]
    }

    /// The strings ending in an `accept` state, less `words`, along the words' trie on the
    /// minimal DFA (see [`WithoutWords`]); `None` past the limits: `max_states` minimal
    /// states (at most [`MAX_KEY_STATES`]), or a trie too big to walk.
    ///
    /// ```text
    /// [^_]*(_[^_]*)* ending not in _x, less ["ab"]  ⇒  trie: a (b (exits) | exits) | exits; states: the DFA's
    /// ```
    pub(crate) fn without_words(&self, accept: &[bool], words: &[String], max_states: usize) -> Option<WithoutWords> {
        let rev = self.predecessors();
        let Some(m) = self.minimal(accept, &rev, max_states.min(MAX_KEY_STATES))? else {
            return Some(WithoutWords { root: TrieNode::default(), states: Vec::new() });
        };
        let mut words: Vec<Vec<char>> = words.iter().map(|w| w.chars().collect()).collect();
        words.sort_unstable();
        words.dedup();
        let nodes: usize = words.iter().map(Vec::len).sum::<usize>() + m.count;
        if nodes.saturating_mul(self.columns.len()) > MAX_TRIE_WORK {
            return None;
        }
        let root = self.trie_node(&m, 0, &words, 0);
        // Each minimal state from one of its product states (they all move alike).
        let mut states: Vec<Option<TrieNode>> = (0..m.count).map(|_| None).collect();
        for s in (0..self.len()).filter(|&s| m.live[s]) {
            let k = m.class[s] as usize;
            if states[k].is_none() {
                let exits = self.exits(&m, s, &ClassUnicode::empty());
                states[k] = Some(TrieNode { ends: m.accept[s], next: Vec::new(), exits });
            }
        }
        Some(WithoutWords { root, states: states.into_iter().map(Option::unwrap_or_default).collect() })
    }

    /// The node of the trie of `words` (sorted, sharing their first `depth` characters)
    /// where the DFA is in state `s`.
    fn trie_node(&self, m: &Minimal<'_>, s: usize, words: &[Vec<char>], depth: usize) -> TrieNode {
        let ending = words.iter().take_while(|w| w.len() == depth).count();
        let mut node = TrieNode { ends: ending == 0 && m.accept[s], ..TrieNode::default() };
        let mut taken = Vec::new();
        for run in words[ending..].chunk_by(|a, b| a[depth] == b[depth]) {
            let c = run[0][depth];
            taken.push(ClassUnicodeRange::new(c, c));
            let t = self.step(s, c);
            if t != DEAD && m.live[t as usize] {
                let sub = self.trie_node(m, t as usize, run, depth + 1);
                if !sub.is_empty() {
                    node.next.push((c, sub));
                }
            }
        }
        node.exits = self.exits(m, s, &ClassUnicode::new(taken));
        node
    }

    /// The characters but `taken` that move state `s` to a live one, by the minimal state
    /// they lead to.
    fn exits(&self, m: &Minimal<'_>, s: usize, taken: &ClassUnicode) -> Vec<(ClassUnicode, usize)> {
        let ncols = self.columns.len();
        let mut by_target: Vec<(usize, Vec<ClassUnicodeRange>)> = Vec::new();
        for (c, &t) in self.next[s * ncols..(s + 1) * ncols].iter().enumerate() {
            if t == DEAD || !m.live[t as usize] {
                continue;
            }
            let k = m.class[t as usize] as usize;
            let range = ClassUnicodeRange::new(self.columns[c].0, self.columns[c].1);
            match by_target.iter_mut().find(|(kk, _)| *kk == k) {
                Some((_, ranges)) => ranges.push(range),
                None => by_target.push((k, vec![range])),
            }
        }
        let mut out = Vec::with_capacity(by_target.len());
        for (k, ranges) in by_target {
            let mut class = ClassUnicode::new(ranges);
            class.difference(taken);
            if !class.ranges().is_empty() {
                out.push((class, k));
            }
        }
        out
    }

    /// Whether `word` ends in an `accept` state.
    pub(crate) fn ends_in(&self, accept: &[bool], word: &str) -> bool {
        let mut s = 0;
        for c in word.chars() {
            match self.step(s, c) {
                DEAD => return false,
                t => s = t as usize,
            }
        }
        accept[s]
    }

    /// The state after reading `c` in state `s`.
    fn step(&self, s: usize, c: char) -> u32 {
        let col = self.columns.partition_point(|&(_, e)| e < c);
        self.next[s * self.columns.len() + col]
    }

    /// Each state's predecessors.
    fn predecessors(&self) -> Vec<Vec<u32>> {
        let ncols = self.columns.len();
        let mut rev: Vec<Vec<u32>> = vec![Vec::new(); self.len()];
        for s in 0..self.len() {
            for &t in &self.next[s * ncols..(s + 1) * ncols] {
                if t != DEAD {
                    rev[t as usize].push(s as u32);
                }
            }
        }
        rev
    }

    /// The minimal DFA of the strings ending in an `accept` state (`rev`: each state's
    /// predecessors): `Some(None)` when there are none, `None` past `max` states.
    fn minimal<'a>(&self, accept: &'a [bool], rev: &[Vec<u32>], max: usize) -> Option<Option<Minimal<'a>>> {
        let n = self.len();
        let ncols = self.columns.len();
        // States from which an accepting one is reachable.
        let mut live = accept.to_vec();
        let mut stack: Vec<usize> = (0..n).filter(|&s| accept[s]).collect();
        while let Some(s) = stack.pop() {
            for &p in &rev[s] {
                if !live[p as usize] {
                    live[p as usize] = true;
                    stack.push(p as usize);
                }
            }
        }
        if !live[0] {
            return Some(None);
        }
        // Moore's minimization of the live part (dead targets as one class).
        let mut class: Vec<u32> = (0..n).map(|s| if !live[s] { DEAD } else { accept[s] as u32 }).collect();
        let mut count = 0;
        loop {
            let mut sigs: HashMap<Vec<u32>, u32> = HashMap::default();
            let mut fresh = vec![DEAD; n];
            for s in (0..n).filter(|&s| live[s]) {
                let mut sig = Vec::with_capacity(ncols + 1);
                sig.push(class[s]);
                for &t in &self.next[s * ncols..(s + 1) * ncols] {
                    sig.push(if t == DEAD { DEAD } else { class[t as usize] });
                }
                let k = sigs.len() as u32;
                fresh[s] = *sigs.entry(sig).or_insert(k);
            }
            let c = sigs.len();
            class = fresh;
            if c == count {
                break;
            }
            count = c;
            if count > max {
                return None;
            }
        }
        Some(Some(Minimal { accept, live, class, count }))
    }
}

/// Trie nodes times the partition's columns that [`Product::without_words`] walks at most.
const MAX_TRIE_WORK: usize = 4_000_000;

/// The most states of a minimal DFA that [`Product::without_words`] writes out.
pub(crate) const MAX_KEY_STATES: usize = 400;

/// The most states of the minimal DFA of a combination of patterns (a complement, an
/// intersection) that the exact form of an object's extra keys takes on. A big complement
/// lets nearly every token through where a key may start, so each first mask in such a
/// key walks the whole vocabulary: the complements of the BCP 47 tag patterns of OCDS
/// schemas (Github_ultra/o12652, over 40 states each) made first masks of 46 ms on
/// Gemma 3's 262k tokens. Past this the object keeps its narrower form, with its warning.
pub(crate) const MAX_COMBINED_STATES: usize = 40;

/// A key language less some of its words: the words' trie walked on the language's
/// minimal DFA. At each node: the end of the key (unless the node is one of the words),
/// the words' next characters, and the characters that leave the trie, each into the
/// DFA state it reaches ([`WithoutWords::states`], from there on the DFA itself). Its
/// size is the trie's plus the DFA's, where the language's derivatives by every prefix
/// of the trie ([`crate::hirset::minus_words`]) copy the language at every node.
#[derive(Debug)]
pub(crate) struct WithoutWords {
    pub(crate) root: TrieNode,
    /// The minimal DFA's states, as nodes without a trie below (`next` empty).
    pub(crate) states: Vec<TrieNode>,
}

/// A node of [`WithoutWords`]'s trie, or a state of its DFA.
#[derive(Debug, Default)]
pub(crate) struct TrieNode {
    /// Whether a key may end here.
    pub(crate) ends: bool,
    /// The words' next characters, and their nodes.
    pub(crate) next: Vec<(char, TrieNode)>,
    /// A character of the class, then the DFA from that state.
    pub(crate) exits: Vec<(ClassUnicode, usize)>,
}

impl TrieNode {
    /// Whether no string goes through this node.
    pub(crate) fn is_empty(&self) -> bool {
        !self.ends && self.next.is_empty() && self.exits.is_empty()
    }
}

impl WithoutWords {
    /// Whether `s` is in the language (for tests: a walk of the trie, then the DFA).
    #[cfg(test)]
    pub(crate) fn accepts(&self, s: &str) -> bool {
        let mut node = &self.root;
        let mut chars = s.chars();
        loop {
            let Some(c) = chars.next() else { return node.ends };
            if let Some((_, sub)) = node.next.iter().find(|(n, _)| *n == c) {
                node = sub;
                continue;
            }
            match node.exits.iter().find(|(class, _)| crate::hirset::class_has(class, c)) {
                Some(&(_, k)) => node = &self.states[k],
                None => return false,
            }
        }
    }
}

/// A minimal DFA inside the product: the classes of the live states (those that reach an
/// accepting one).
struct Minimal<'a> {
    accept: &'a [bool],
    live: Vec<bool>,
    class: Vec<u32>,
    count: usize,
}

/// The character after `c`, skipping the surrogates; `None` after the last.
fn succ(c: char) -> Option<char> {
    match c {
        '\u{D7FF}' => Some('\u{E000}'),
        char::MAX => None,
        _ => char::from_u32(c as u32 + 1),
    }
}

fn unicode(c: &Class) -> Option<ClassUnicode> {
    match c {
        Class::Unicode(u) => Some(u.clone()),
        Class::Bytes(b) => b.to_unicode_class(),
    }
}

/// The coarsest partition of the characters into intervals that every class and literal
/// character of `langs` is a union of; `None` past `max` intervals or on a HIR with an
/// assertion or a non-UTF-8 part.
fn partition(langs: &[&Hir], max: usize) -> Option<Vec<(char, char)>> {
    fn bounds(h: &Hir, out: &mut Vec<char>) -> Option<()> {
        match h.kind() {
            HirKind::Empty => {}
            HirKind::Literal(l) => {
                for c in std::str::from_utf8(&l.0).ok()?.chars() {
                    out.push(c);
                    out.extend(succ(c));
                }
            }
            HirKind::Class(c) => {
                for r in unicode(c)?.ranges() {
                    out.push(r.start());
                    out.extend(succ(r.end()));
                }
            }
            HirKind::Look(_) => return None,
            HirKind::Repetition(r) => bounds(&r.sub, out)?,
            HirKind::Capture(c) => bounds(&c.sub, out)?,
            HirKind::Concat(v) | HirKind::Alternation(v) => {
                for x in v {
                    bounds(x, out)?;
                }
            }
        }
        Some(())
    }
    let mut starts = vec!['\0'];
    for h in langs {
        bounds(h, &mut starts)?;
    }
    starts.sort_unstable();
    starts.dedup();
    if starts.len() > max {
        return None;
    }
    let mut out = Vec::with_capacity(starts.len());
    for (i, &s) in starts.iter().enumerate() {
        let end = match starts.get(i + 1) {
            // The character before the next start.
            Some(&n) => match n {
                '\u{E000}' => '\u{D7FF}',
                _ => char::from_u32(n as u32 - 1)?,
            },
            None => char::MAX,
        };
        out.push((s, end));
    }
    Some(out)
}

/// A Thompson NFA over the partition's columns.
struct Nfa<'c> {
    states: Vec<NState>,
    columns: &'c [(char, char)],
    max: usize,
}

#[derive(Default)]
struct NState {
    eps: Vec<u32>,
    /// The columns of a character edge, and its target.
    class: Option<(Vec<u32>, u32)>,
    accept: Option<usize>,
}

impl Nfa<'_> {
    fn push(&mut self) -> Option<u32> {
        if self.states.len() >= self.max {
            return None;
        }
        self.states.push(NState::default());
        Some(self.states.len() as u32 - 1)
    }

    /// The columns inside class `u` (whole intervals, by construction).
    fn cols(&self, u: &ClassUnicode) -> Vec<u32> {
        let mut out = Vec::new();
        for r in u.ranges() {
            let from = self.columns.partition_point(|&(_, e)| e < r.start());
            for (i, &(s, _)) in self.columns.iter().enumerate().skip(from) {
                if s > r.end() {
                    break;
                }
                out.push(i as u32);
            }
        }
        out
    }

    fn edge(&mut self, cols: Vec<u32>) -> Option<(u32, u32)> {
        let s = self.push()?;
        let e = self.push()?;
        self.states[s as usize].class = Some((cols, e));
        Some((s, e))
    }

    /// The fragment of `h`: its start and end states (the end has no edges yet).
    fn build(&mut self, h: &Hir) -> Option<(u32, u32)> {
        match h.kind() {
            HirKind::Empty => {
                let s = self.push()?;
                Some((s, s))
            }
            HirKind::Literal(l) => {
                let text = std::str::from_utf8(&l.0).ok()?;
                let first = self.push()?;
                let mut cur = first;
                for c in text.chars() {
                    let cols = self.cols(&ClassUnicode::new([ClassUnicodeRange::new(c, c)]));
                    let (s, e) = self.edge(cols)?;
                    self.states[cur as usize].eps.push(s);
                    cur = e;
                }
                Some((first, cur))
            }
            HirKind::Class(c) => {
                let cols = self.cols(&unicode(c)?);
                self.edge(cols)
            }
            HirKind::Look(_) => None,
            HirKind::Capture(c) => self.build(&c.sub),
            HirKind::Concat(v) => {
                let first = self.push()?;
                let mut cur = first;
                for x in v {
                    let (s, e) = self.build(x)?;
                    self.states[cur as usize].eps.push(s);
                    cur = e;
                }
                Some((first, cur))
            }
            HirKind::Alternation(v) => {
                let s = self.push()?;
                let e = self.push()?;
                for x in v {
                    let (a, b) = self.build(x)?;
                    self.states[s as usize].eps.push(a);
                    self.states[b as usize].eps.push(e);
                }
                Some((s, e))
            }
            HirKind::Repetition(r) => {
                let first = self.push()?;
                let mut cur = first;
                for _ in 0..r.min {
                    let (s, e) = self.build(&r.sub)?;
                    self.states[cur as usize].eps.push(s);
                    cur = e;
                }
                match r.max {
                    None => {
                        let (s, e) = self.build(&r.sub)?;
                        self.states[cur as usize].eps.push(s);
                        self.states[e as usize].eps.push(cur);
                    }
                    Some(max) => {
                        for _ in r.min..max {
                            let (s, e) = self.build(&r.sub)?;
                            let after = self.push()?;
                            self.states[cur as usize].eps.extend([s, after]);
                            self.states[e as usize].eps.push(after);
                            cur = after;
                        }
                    }
                }
                Some((first, cur))
            }
        }
    }

    /// The states reachable from `set` by empty moves, sorted.
    fn closure(&self, mut set: Vec<u32>, marks: &mut Marks) -> Vec<u32> {
        if set.is_empty() {
            return set;
        }
        marks.next_round(self.states.len());
        set.retain(|&q| marks.insert(q));
        let mut i = 0;
        while i < set.len() {
            for &t in &self.states[set[i] as usize].eps {
                if marks.insert(t) {
                    set.push(t);
                }
            }
            i += 1;
        }
        set.sort_unstable();
        set
    }
}

/// The NFA states one closure has seen: a round number per state, so that each closure
/// starts empty without clearing.
#[derive(Default)]
struct Marks {
    round: u32,
    seen: Vec<u32>,
}

impl Marks {
    fn next_round(&mut self, states: usize) {
        self.seen.resize(states, 0);
        self.round += 1;
    }

    /// Marks `q`; whether it was new this round.
    fn insert(&mut self, q: u32) -> bool {
        let new = self.seen[q as usize] != self.round;
        self.seen[q as usize] = self.round;
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(h: &Hir) -> regex_automata::meta::Regex {
        crate::memo::hir_matcher(h).unwrap()
    }

    fn strings(alphabet: &[char], max_len: usize) -> Vec<String> {
        let mut all = vec![String::new()];
        let mut frontier = vec![String::new()];
        for _ in 0..max_len {
            let next: Vec<String> =
                frontier.iter().flat_map(|s| alphabet.iter().map(move |c| format!("{s}{c}"))).collect();
            all.extend(next.iter().cloned());
            frontier = next;
        }
        all
    }

    /// Every membership vector's language holds exactly the strings with that vector.
    #[test]
    fn languages_brute_force() {
        let all = strings(&['a', 'b', 'C', '\n', 'é'], 4);
        let sets: &[&[&str]] = &[
            &["^.{1,3}$", "a"],
            &["^[a-z]+$"],
            &["^a", "b$", "^(ab)*$"],
            &["", "^$"],
            &["^[^a]*$", "C", "^.{2}$"],
            &["é|^C+b?$", "\\n"],
        ];
        for pats in sets {
            let hirs: Vec<Hir> = pats.iter().map(|p| crate::ecma::full_match_hir(p).unwrap()).collect();
            let refs: Vec<&Hir> = hirs.iter().collect();
            let prod = Product::new(&refs, KeyLimits::default()).unwrap();
            let matchers: Vec<_> = hirs.iter().map(re).collect();
            let mut vectors: Vec<Vec<bool>> = (0..prod.len()).map(|s| prod.member(s).to_vec()).collect();
            vectors.sort();
            vectors.dedup();
            for v in vectors {
                let accept: Vec<bool> = (0..prod.len()).map(|s| prod.member(s) == v.as_slice()).collect();
                let lang = prod.without_words(&accept, &[], MAX_KEY_STATES).unwrap();
                for s in &all {
                    let want: Vec<bool> = matchers.iter().map(|r| r.is_match(s)).collect();
                    assert_eq!(lang.accepts(s), want == v, "{pats:?} vector {v:?} on {s:?}: {lang:?}");
                }
            }
        }
    }

    /// Each membership vector's language less some words holds exactly its strings that
    /// are none of the words, whether the words are in the language or not.
    #[test]
    fn without_words_brute_force() {
        let all = strings(&['a', 'b', '_', 'é'], 5);
        let cases: &[(&str, &[&str])] = &[
            ("_a$", &["a", "b_a", "ab", "", "é_"]),
            ("^[ab]{1,3}$", &["a", "ab", "aba", "bbb", "abab"]),
            ("^(ab)*$", &["", "ab", "abab", "b"]),
            ("a", &["a", "aa", "ba", "_é"]),
        ];
        for (pat, words) in cases {
            let h = crate::ecma::full_match_hir(pat).unwrap();
            let prod = Product::new(&[&h], KeyLimits::default()).unwrap();
            let matcher = re(&h);
            let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
            for inside in [true, false] {
                let accept: Vec<bool> = (0..prod.len()).map(|s| prod.member(s)[0] == inside).collect();
                let w = prod.without_words(&accept, &words, MAX_KEY_STATES).unwrap();
                for s in &all {
                    let want = matcher.is_match(s) == inside && !words.contains(s);
                    assert_eq!(w.accepts(s), want, "{pat} (inside: {inside}) less {words:?} on {s:?}: {w:?}");
                }
            }
        }
    }

    #[test]
    fn limits_are_kept() {
        let h = crate::ecma::full_match_hir("^a{1,5000}$").unwrap();
        let limits = KeyLimits { nfa_states: 1000, ..KeyLimits::default() };
        assert!(Product::new(&[&h], limits).is_none());
    }
}
