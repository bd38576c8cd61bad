//! A slow, obviously-correct recognizer for [`Grammar`]s, used as a test oracle.
//!
//! It shares nothing with the real engine (which compiles rules to automata and runs an
//! Earley parser): it works directly over the expression tree. For a fixed input it
//! computes, for every (expression, start position), the set of positions where a match
//! of the expression can end, plus one flag, *viable*: whether the rest of the input from
//! the start position is a prefix of some string of the expression's language.
//!
//! Recursion (left, right, mutual, through nullable rules) is handled by a least-fixpoint
//! iteration. Positions are processed from the end of the input to its start: everything
//! that starts after position `p` is final when `p` is processed, and the rules at `p`
//! itself are re-evaluated until no rule's result changes.
//!
//! Byte-level semantics: a literal is its bytes; a class or `.` is one code point, UTF-8
//! encoded; a regex must match the whole span; token terminals are not supported.
//!
//! ```
//! use stencil_grammar::{Expr, Grammar};
//! use stencil_grammar::reference::Recognizer;
//! // root ::= "(" root ")" root | ""
//! let mut g = Grammar::new();
//! let root = g.add_rule("root", Expr::Empty);
//! g.set_body(root, Expr::alt([
//!     Expr::seq([Expr::literal("("), Expr::Rule(root), Expr::literal(")"), Expr::Rule(root)]),
//!     Expr::Empty,
//! ]));
//! g.root = root;
//! let r = Recognizer::new(&g).unwrap();
//! assert!(r.matches(b"(())()"));
//! assert!(!r.matches(b"(()"));
//! assert!(r.is_prefix(b"(()"));
//! assert!(!r.is_prefix(b"())"));
//! ```

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::rc::Rc;

use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};

use crate::ir::{CharClass, Expr, Grammar, RuleId, MAX_CODE_POINT};

/// Why a grammar cannot be given to the reference [`Recognizer`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    /// The grammar uses a token terminal (`<...>`), which has no byte-level meaning here.
    #[error("rule `{rule}` uses a token terminal, which the reference recognizer does not support")]
    Token { rule: String },
    /// A rule reference points past the end of [`Grammar::rules`].
    #[error("rule `{rule}` refers to rule id {id}, which does not exist")]
    BadRuleId { rule: String, id: u32 },
    /// [`Grammar::root`] points past the end of [`Grammar::rules`].
    #[error("the root rule id {0} does not exist")]
    BadRoot(u32),
    /// A regex terminal could not be compiled.
    #[error("regex {pattern:?} in rule `{rule}`: {message}")]
    Regex { rule: String, pattern: String, message: String },
}

/// A reference recognizer for one grammar. See the [module docs](self).
///
/// ```
/// use stencil_grammar::{Expr, Grammar};
/// use stencil_grammar::reference::Recognizer;
/// // root ::= [α-ω]
/// let mut g = Grammar::new();
/// g.root = g.add_rule("root", Expr::class([('α', 'ω')]));
/// let r = Recognizer::new(&g).unwrap();
/// let beta = "β".as_bytes();
/// assert!(r.matches(beta));
/// assert!(r.is_prefix(&beta[..1])); // the first byte of a two-byte character
/// assert!(!r.is_prefix(&beta[1..])); // a lone continuation byte
/// ```
pub struct Recognizer<'g> {
    grammar: &'g Grammar,
    /// The expression tree of every rule, flattened: children are indices into `nodes`.
    nodes: Vec<Node>,
    /// `bodies[r]`: the node of rule `r`'s body.
    bodies: Vec<usize>,
    regexes: Vec<RegexTerminal>,
    /// `productive[node]`: the node's language is non-empty.
    productive: Vec<bool>,
    /// `rule_productive[r]`: rule `r`'s language is non-empty.
    rule_productive: Vec<bool>,
}

/// One expression, with children as indices into [`Recognizer::nodes`].
enum Node {
    Empty,
    Literal(Vec<u8>),
    /// One code point from these sorted, disjoint ranges (which contain no surrogate).
    Chars(Vec<(u32, u32)>),
    /// Index into [`Recognizer::regexes`].
    Regex(usize),
    Rule(usize),
    Seq(Vec<usize>),
    Alt(Vec<usize>),
    Repeat {
        child: usize,
        min: u32,
        max: Option<u32>,
    },
}

/// What an expression does from one start position of the input.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Outcome {
    /// Positions `q` such that `input[start..q]` is in the expression's language.
    ends: BTreeSet<usize>,
    /// `input[start..]` is a prefix of some string of the language (possibly all of it).
    viable: bool,
}

impl<'g> Recognizer<'g> {
    /// Prepares a recognizer. Fails on token terminals, invalid rule ids (including the
    /// root) and regexes that do not compile.
    pub fn new(g: &'g Grammar) -> Result<Self, ReferenceError> {
        if g.root.0 as usize >= g.rules.len() {
            return Err(ReferenceError::BadRoot(g.root.0));
        }
        let mut rec = Recognizer {
            grammar: g,
            nodes: Vec::new(),
            bodies: Vec::new(),
            regexes: Vec::new(),
            productive: Vec::new(),
            rule_productive: Vec::new(),
        };
        for rule in &g.rules {
            let body = rec.add_node(&rule.name, &rule.body)?;
            rec.bodies.push(body);
        }
        rec.compute_productivity();
        Ok(rec)
    }

    /// The grammar this recognizer was built for.
    pub fn grammar(&self) -> &'g Grammar {
        self.grammar
    }

    /// Is `input` a complete string of the root rule's language?
    ///
    /// ```
    /// use stencil_grammar::{Expr, Grammar};
    /// use stencil_grammar::reference::Recognizer;
    /// let mut g = Grammar::new();
    /// g.root = g.add_rule("root", Expr::repeat(Expr::literal("x"), 2, Some(3)));
    /// let r = Recognizer::new(&g).unwrap();
    /// assert!(r.matches(b"xx") && r.matches(b"xxx"));
    /// assert!(!r.matches(b"x") && !r.matches(b"xxxx"));
    /// ```
    pub fn matches(&self, input: &[u8]) -> bool {
        self.run(input).ends.contains(&input.len())
    }

    /// Is `input` a prefix of some string of the root rule's language (the string itself
    /// included)? The input may end in the middle of a UTF-8 character. The empty input
    /// is a prefix exactly when the language is non-empty.
    ///
    /// ```
    /// use stencil_grammar::{Expr, Grammar};
    /// use stencil_grammar::reference::Recognizer;
    /// let mut g = Grammar::new();
    /// g.root = g.add_rule("root", Expr::seq([Expr::literal("ab"), Expr::literal("c")]));
    /// let r = Recognizer::new(&g).unwrap();
    /// assert!(r.is_prefix(b"") && r.is_prefix(b"ab") && r.is_prefix(b"abc"));
    /// assert!(!r.is_prefix(b"b") && !r.is_prefix(b"abcd"));
    /// ```
    pub fn is_prefix(&self, input: &[u8]) -> bool {
        self.run(input).viable
    }

    /// Both answers in one pass: `(matches(input), is_prefix(input))`.
    ///
    /// ```
    /// use stencil_grammar::{Expr, Grammar};
    /// use stencil_grammar::reference::Recognizer;
    /// let mut g = Grammar::new();
    /// g.root = g.add_rule("root", Expr::literal("ab"));
    /// let r = Recognizer::new(&g).unwrap();
    /// assert_eq!(r.matches_and_is_prefix(b"a"), (false, true));
    /// assert_eq!(r.matches_and_is_prefix(b"ab"), (true, true));
    /// ```
    pub fn matches_and_is_prefix(&self, input: &[u8]) -> (bool, bool) {
        let out = self.run(input);
        (out.ends.contains(&input.len()), out.viable)
    }

    /// Does the rule derive at least one string? (Panics on an invalid id.)
    ///
    /// ```
    /// use stencil_grammar::{Expr, Grammar};
    /// use stencil_grammar::reference::Recognizer;
    /// // loop ::= "a" loop  (never terminates, so its language is empty)
    /// let mut g = Grammar::new();
    /// let l = g.add_rule("loop", Expr::Empty);
    /// g.set_body(l, Expr::seq([Expr::literal("a"), Expr::Rule(l)]));
    /// g.root = l;
    /// assert!(!Recognizer::new(&g).unwrap().is_productive(l));
    /// ```
    pub fn is_productive(&self, rule: RuleId) -> bool {
        self.rule_productive[rule.0 as usize]
    }

    /// Flattens `e` into `self.nodes` and returns its index.
    fn add_node(&mut self, rule: &str, e: &Expr) -> Result<usize, ReferenceError> {
        let node = match e {
            Expr::Empty => Node::Empty,
            Expr::Literal(bytes) => Node::Literal(bytes.clone()),
            Expr::Class(class) => Node::Chars(class.code_points()),
            Expr::AnyChar => Node::Chars(CharClass::new([(0, MAX_CODE_POINT)]).code_points()),
            Expr::Regex(pattern) => {
                let re = RegexTerminal::new(pattern).map_err(|message| ReferenceError::Regex {
                    rule: rule.to_string(),
                    pattern: pattern.to_string(),
                    message,
                })?;
                self.regexes.push(re);
                Node::Regex(self.regexes.len() - 1)
            }
            Expr::Rule(id) => {
                if id.0 as usize >= self.grammar.rules.len() {
                    return Err(ReferenceError::BadRuleId { rule: rule.to_string(), id: id.0 });
                }
                Node::Rule(id.0 as usize)
            }
            Expr::Token(_) => return Err(ReferenceError::Token { rule: rule.to_string() }),
            Expr::Seq(items) => Node::Seq(items.iter().map(|x| self.add_node(rule, x)).collect::<Result<_, _>>()?),
            Expr::Alt(items) => Node::Alt(items.iter().map(|x| self.add_node(rule, x)).collect::<Result<_, _>>()?),
            Expr::Repeat { expr, min, max } => Node::Repeat { child: self.add_node(rule, expr)?, min: *min, max: *max },
        };
        self.nodes.push(node);
        Ok(self.nodes.len() - 1)
    }

    /// Least fixpoint: a rule is productive once its body is, given the rules known so far.
    fn compute_productivity(&mut self) {
        let mut rules = vec![false; self.bodies.len()];
        loop {
            let mut changed = false;
            for r in 0..rules.len() {
                if !rules[r] && self.node_productive(self.bodies[r], &rules) {
                    rules[r] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        self.productive = (0..self.nodes.len()).map(|n| self.node_productive(n, &rules)).collect();
        self.rule_productive = rules;
    }

    fn node_productive(&self, node: usize, rules: &[bool]) -> bool {
        match &self.nodes[node] {
            Node::Empty | Node::Literal(_) => true,
            Node::Chars(ranges) => !ranges.is_empty(),
            Node::Regex(i) => self.regexes[*i].is_productive(),
            Node::Rule(r) => rules[*r],
            Node::Seq(items) => items.iter().all(|&x| self.node_productive(x, rules)),
            Node::Alt(items) => items.iter().any(|&x| self.node_productive(x, rules)),
            Node::Repeat { child, min, max } => {
                !max.is_some_and(|m| m < *min) && (*min == 0 || self.node_productive(*child, rules))
            }
        }
    }

    /// The root rule's outcome from position 0.
    fn run(&self, input: &[u8]) -> Outcome {
        let n = input.len();
        let mut run = Run {
            rec: self,
            input,
            rules: vec![vec![Rc::new(Outcome::default()); n + 1]; self.bodies.len()],
            memo: vec![None; (n + 1) * self.nodes.len()],
            current: n,
            read_at_current: vec![false; self.bodies.len()],
        };
        for p in (0..=n).rev() {
            run.current = p;
            loop {
                // Results at `p` may depend on rule results at `p` that are still growing:
                // forget them and evaluate again until nothing that was used changes.
                for node in 0..self.nodes.len() {
                    run.memo[node * (n + 1) + p] = None;
                }
                run.read_at_current.iter_mut().for_each(|x| *x = false);
                let mut changed = vec![false; self.bodies.len()];
                for (r, &body) in self.bodies.iter().enumerate() {
                    let out = run.eval(body, p);
                    let old = &run.rules[r][p];
                    if !(out.ends.is_subset(&old.ends) && out.viable <= old.viable) {
                        let grown = Outcome {
                            ends: old.ends.union(&out.ends).copied().collect(),
                            viable: old.viable || out.viable,
                        };
                        run.rules[r][p] = Rc::new(grown);
                        changed[r] = true;
                    }
                }
                // When no rule that changed was looked at (from `p`) in this round, every
                // rule was computed from final values: this is the fixpoint.
                if !(0..changed.len()).any(|r| changed[r] && run.read_at_current[r]) {
                    break;
                }
            }
        }
        (*run.rules[self.grammar.root.0 as usize][0]).clone()
    }
}

/// The tables for one input.
struct Run<'a, 'g> {
    rec: &'a Recognizer<'g>,
    input: &'a [u8],
    /// `rules[r][p]`: rule `r` from position `p` (final for positions already processed).
    rules: Vec<Vec<Rc<Outcome>>>,
    /// `memo[node * (input.len() + 1) + p]`: node from position `p`, valid for the current
    /// rule tables.
    memo: Vec<Option<Rc<Outcome>>>,
    /// The position being processed: rule results after it are final.
    current: usize,
    /// `read_at_current[r]`: rule `r` was looked up from `current` in this round.
    read_at_current: Vec<bool>,
}

impl Run<'_, '_> {
    fn eval(&mut self, node: usize, p: usize) -> Rc<Outcome> {
        let slot = node * (self.input.len() + 1) + p;
        if let Some(out) = &self.memo[slot] {
            return out.clone();
        }
        let rec = self.rec;
        let input = self.input;
        let n = input.len();
        let out = match &rec.nodes[node] {
            Node::Empty => Outcome { ends: BTreeSet::from([p]), viable: p == n },
            Node::Literal(lit) => {
                let rest = &input[p..];
                let mut ends = BTreeSet::new();
                if rest.starts_with(lit) {
                    ends.insert(p + lit.len());
                }
                Outcome { ends, viable: lit.starts_with(rest) }
            }
            Node::Chars(ranges) => chars_outcome(ranges, input, p),
            Node::Regex(i) => rec.regexes[*i].outcome(input, p),
            Node::Rule(r) => {
                if p == self.current {
                    self.read_at_current[*r] = true;
                }
                return self.rules[*r][p].clone();
            }
            Node::Seq(items) => {
                let mut frontier = BTreeSet::from([p]);
                let mut viable = false;
                for (i, &item) in items.iter().enumerate() {
                    let rest_productive = items[i + 1..].iter().all(|&x| rec.productive[x]);
                    let mut next = BTreeSet::new();
                    for &q in &frontier {
                        let o = self.eval(item, q);
                        // The input runs out inside this item, and the items after it can
                        // still be completed.
                        viable |= o.viable && rest_productive;
                        next.extend(o.ends.iter().copied());
                    }
                    frontier = next;
                }
                viable |= frontier.contains(&n);
                Outcome { ends: frontier, viable }
            }
            Node::Alt(items) => {
                let mut out = Outcome::default();
                for &item in items {
                    let o = self.eval(item, p);
                    out.ends.extend(o.ends.iter().copied());
                    out.viable |= o.viable;
                }
                out
            }
            Node::Repeat { child, min, max } => self.repeat(*child, *min, *max, p),
        };
        let out = Rc::new(out);
        self.memo[slot] = Some(out.clone());
        out
    }

    /// `child{min,max}` from `p`, iterating over the number of repetitions.
    fn repeat(&mut self, child: usize, min: u32, max: Option<u32>, p: usize) -> Outcome {
        let (min, max) = (u64::from(min), max.map(u64::from));
        let mut out = Outcome::default();
        if max.is_some_and(|m| m < min) {
            return out;
        }
        // Positions reached after exactly `count` repetitions (only new ones once
        // `count >= min`: a position first reached with fewer repetitions, but at least
        // `min`, had at least as many repetitions left, so it already covers everything).
        let mut cur = BTreeSet::from([p]);
        let mut seen = BTreeSet::new();
        let mut count = 0u64;
        loop {
            if count >= min {
                cur.retain(|q| !seen.contains(q));
                seen.extend(cur.iter().copied());
                out.ends.extend(cur.iter().copied());
            }
            if cur.is_empty() || max == Some(count) {
                break;
            }
            // One more repetition. If the input runs out inside it, the repetitions still
            // required after it can be completed: the child is viable, so productive.
            let mut next = BTreeSet::new();
            for &q in &cur {
                let o = self.eval(child, q);
                out.viable |= o.viable;
                next.extend(o.ends.iter().copied());
            }
            cur = next;
            count += 1;
        }
        out.viable |= out.ends.contains(&self.input.len());
        out
    }
}

/// One code point from `ranges`, UTF-8 encoded, starting at `input[p]`.
fn chars_outcome(ranges: &[(u32, u32)], input: &[u8], p: usize) -> Outcome {
    let rest = &input[p..];
    let mut ends = BTreeSet::new();
    // The first character of `rest`, if it starts with a valid one: the shortest valid
    // UTF-8 prefix is exactly one character.
    for len in 1..=rest.len().min(4) {
        if let Ok(s) = std::str::from_utf8(&rest[..len]) {
            let c = s.chars().next().unwrap() as u32;
            if in_ranges(ranges, c, c) {
                ends.insert(p + len);
            }
            break;
        }
    }
    let viable = match utf8_completions(rest) {
        Some((lo, hi)) => in_ranges(ranges, lo, hi),
        None => false,
    };
    Outcome { ends, viable }
}

/// Do the ranges share a code point with `lo..=hi`?
fn in_ranges(ranges: &[(u32, u32)], lo: u32, hi: u32) -> bool {
    ranges.iter().any(|&(a, b)| a <= hi && lo <= b)
}

/// The code points whose UTF-8 encoding starts with `partial`, as the smallest and the
/// largest of them (every code point in between qualifies, except surrogates, which UTF-8
/// cannot encode), or `None` when there is none. The empty `partial` gives every code
/// point; a complete encoding gives just its own code point.
pub(crate) fn utf8_completions(partial: &[u8]) -> Option<(u32, u32)> {
    let Some(&lead) = partial.first() else {
        return Some((0, MAX_CODE_POINT));
    };
    // Encoded length, payload bits of the lead byte, and the code points of that length.
    let (len, mut bits, min_cp, max_cp) = match lead {
        0x00..=0x7F => (1, u32::from(lead), 0, 0x7F),
        0xC0..=0xDF => (2, u32::from(lead & 0x1F), 0x80, 0x7FF),
        0xE0..=0xEF => (3, u32::from(lead & 0x0F), 0x800, 0xFFFF),
        0xF0..=0xF7 => (4, u32::from(lead & 0x07), 0x1_0000, MAX_CODE_POINT),
        _ => return None,
    };
    if partial.len() > len {
        return None;
    }
    for &b in &partial[1..] {
        if b & 0xC0 != 0x80 {
            return None;
        }
        bits = (bits << 6) | u32::from(b & 0x3F);
    }
    // The missing continuation bytes carry 6 free bits each.
    let free = 6 * (len - partial.len()) as u32;
    let mut lo = (bits << free).max(min_cp);
    let mut hi = ((bits << free) | ((1 << free) - 1)).min(max_cp);
    if (0xD800..=0xDFFF).contains(&lo) {
        lo = 0xE000;
    }
    if (0xD800..=0xDFFF).contains(&hi) {
        hi = 0xD7FF;
    }
    (lo <= hi).then_some((lo, hi))
}

/// A compiled regex terminal: a DFA for full matches, anchored at the start, that reports
/// every match (not just the leftmost-first one).
pub(crate) struct RegexTerminal {
    dfa: dense::DFA<Vec<u32>>,
    start: StateID,
    /// For every state reachable from `start` that can still reach a match: the fewest
    /// further bytes needed to complete one. States absent here can never match.
    dist: HashMap<StateID, u32>,
}

impl RegexTerminal {
    pub(crate) fn new(pattern: &str) -> Result<Self, String> {
        let dfa = dense::Builder::new()
            .configure(dense::Config::new().match_kind(MatchKind::All).start_kind(StartKind::Anchored))
            .build(pattern)
            .map_err(|e| e.to_string())?;
        let start = dfa.start_state(&start::Config::new().anchored(Anchored::Yes)).map_err(|e| e.to_string())?;
        // Every reachable state and its predecessors.
        let mut preds: HashMap<StateID, Vec<StateID>> = HashMap::from([(start, Vec::new())]);
        let mut queue = VecDeque::from([start]);
        while let Some(s) = queue.pop_front() {
            for b in 0..=255u8 {
                let t = dfa.next_state(s, b);
                if dfa.is_dead_state(t) || dfa.is_quit_state(t) {
                    continue;
                }
                preds
                    .entry(t)
                    .or_insert_with(|| {
                        queue.push_back(t);
                        Vec::new()
                    })
                    .push(s);
            }
        }
        // Breadth-first search backwards from the states where the input may end.
        let mut dist = HashMap::new();
        let mut queue = VecDeque::new();
        for &s in preds.keys() {
            if dfa.is_match_state(dfa.next_eoi_state(s)) {
                dist.insert(s, 0);
                queue.push_back(s);
            }
        }
        while let Some(s) = queue.pop_front() {
            let d = dist[&s];
            for &t in &preds[&s] {
                dist.entry(t).or_insert_with(|| {
                    queue.push_back(t);
                    d + 1
                });
            }
        }
        Ok(RegexTerminal { dfa, start, dist })
    }

    pub(crate) fn start(&self) -> StateID {
        self.start
    }

    pub(crate) fn step(&self, s: StateID, b: u8) -> StateID {
        self.dfa.next_state(s, b)
    }

    /// Fewest bytes still needed from `s` to complete a match, `None` when impossible.
    pub(crate) fn dist(&self, s: StateID) -> Option<u32> {
        self.dist.get(&s).copied()
    }

    /// Does the regex match at least one string?
    pub(crate) fn is_productive(&self) -> bool {
        self.dist(self.start).is_some()
    }

    fn outcome(&self, input: &[u8], p: usize) -> Outcome {
        let mut out = Outcome::default();
        let mut s = self.start;
        let mut q = p;
        loop {
            // `dist` is 0 exactly where the bytes so far are a full match.
            match self.dist(s) {
                None => break,
                Some(0) => {
                    out.ends.insert(q);
                }
                Some(_) => {}
            }
            if q == input.len() {
                out.viable = true;
                break;
            }
            s = self.step(s, input[q]);
            q += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `utf8_completions` against the definition, over every code point.
    #[test]
    fn utf8_completions_is_exact() {
        let mut want: HashMap<Vec<u8>, (u32, u32)> = HashMap::new();
        let mut buf = [0u8; 4];
        for c in (0..=MAX_CODE_POINT).filter_map(char::from_u32) {
            let enc = c.encode_utf8(&mut buf).as_bytes();
            for k in 0..=enc.len() {
                let e = want.entry(enc[..k].to_vec()).or_insert((c as u32, c as u32));
                e.0 = e.0.min(c as u32);
                e.1 = e.1.max(c as u32);
            }
        }
        for (partial, range) in &want {
            assert_eq!(utf8_completions(partial), Some(*range), "{partial:x?}");
        }
        // Every 1- and 2-byte string that starts no encoding gets `None`.
        for a in 0..=255u8 {
            assert_eq!(utf8_completions(&[a]), want.get(&vec![a]).copied(), "{a:x}");
            for b in 0..=255u8 {
                assert_eq!(utf8_completions(&[a, b]), want.get(&vec![a, b]).copied(), "{a:x} {b:x}");
            }
        }
        assert_eq!(utf8_completions(b"ab"), None);
        assert_eq!(utf8_completions(&[0xED, 0xA0]), None); // surrogates
        assert_eq!(utf8_completions(&[0xF4, 0x90]), None); // above U+10FFFF
        assert_eq!(utf8_completions(&[0xE0, 0x80]), None); // overlong
    }

    #[test]
    fn regex_reports_every_match_end() {
        // Leftmost-first semantics would stop at "a".
        let re = RegexTerminal::new("a|ab").unwrap();
        let o = re.outcome(b"xab", 1);
        assert_eq!(o.ends, BTreeSet::from([2, 3]));
        assert!(o.viable);
        let re = RegexTerminal::new("a[^\\s\\S]").unwrap();
        assert!(!re.is_productive());
        assert!(!re.outcome(b"a", 0).viable);
    }
}
