//! Reasoning budgets: `any_text`'s `max_tokens`, counted by the decode loop.
//!
//! The grammar does not count tokens (a token count is not a property of the text). The
//! compiled tag lists its budgets ([`CompiledTag::budgets`](crate::CompiledTag::budgets): where, how many tokens, what
//! closes the segment), and a [`Reader`] fed the reply as it is decoded says, cheaply, after
//! each token, whether the reply is inside a budgeted segment ([`Reader::budget`](crate::Reader::budget)): which
//! one, since which byte, and the text that closes it from here. The loop counts the tokens
//! decoded while inside; once `max_tokens` are spent it appends the closing text (the
//! enclosing tag's end, or its rest when the model has begun writing it) as forced tokens,
//! which the grammar accepts.
//!
//! ```
//! use stencil_structural::{compile_json, Close, CompileOptions};
//! let tag = serde_json::json!({"format": {"type": "sequence", "elements": [
//!     {"type": "tag", "begin": "<think>", "content": {"type": "any_text", "max_tokens": 64}, "end": "</think>"},
//!     {"type": "const_string", "value": "Answer: 42"}]}});
//! let compiled = compile_json(&tag, &CompileOptions::default())?;
//! assert_eq!(compiled.budgets[0].max_tokens, 64);
//! assert_eq!(compiled.budgets[0].close, Some(Close::Text("</think>".into())));
//! let mut reader = compiled.reader().unwrap();
//! assert_eq!(reader.budget(), None);
//! reader.feed(b"<think>Let me see").unwrap();
//! let at = reader.budget().unwrap();
//! assert_eq!((at.budget, at.start, at.close.as_str()), (0, 7, "</think>"));
//! reader.feed(b" </thi").unwrap();
//! assert_eq!(reader.budget().unwrap().close, "nk>");
//! reader.feed(b"nk>").unwrap();
//! assert_eq!(reader.budget(), None);
//! # Ok::<(), stencil_structural::StructuralError>(())
//! ```

use crate::capture::Reader;
use crate::compile::Mark;
use crate::Close;

/// Where a reply is in a budgeted segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetPosition {
    /// The budget's index in [`CompiledTag::budgets`](crate::CompiledTag::budgets)(crate::CompiledTag::budgets).
    pub budget: u32,
    /// The byte where the budgeted text began.
    pub start: usize,
    /// The text that closes the segment from here (empty when the budgeted text has no
    /// enclosing tag, or its end is a token: see [`Close`]).
    pub close: String,
}

/// Caller levels followed up from the parser's current items.
const MAX_LEVELS: usize = 64;

impl Reader<'_> {
    /// Whether the text read so far ends inside a budgeted `any_text` (or in its tag's end
    /// marker, being written): the budget, where its text began and what closes it. Costs
    /// a walk over the parser's current items and their callers, not over the text.
    pub fn budget(&self) -> Option<BudgetPosition> {
        let chart = self.chart();
        let p = &chart.program;
        let n = chart.sets.len() - 1;
        let mut best: Option<(u32, usize)> = None;
        for it in &chart.sets[n].items {
            let (mut rule, mut origin) = (p.rule_of(it.state), it.origin as usize);
            for _ in 0..MAX_LEVELS {
                if let Some(Mark::Text { budget: Some(b) }) = &p.marks[rule as usize] {
                    if best.map_or(true, |(_, s)| origin < s) {
                        best = Some((*b, origin));
                    }
                    break;
                }
                let Some(&(c, _)) = chart.sets[origin].waiting.get(&rule).and_then(|v| v.first()) else { break };
                let caller = chart.sets[origin].items[c as usize];
                (rule, origin) = (p.rule_of(caller.state), caller.origin as usize);
            }
        }
        let (budget, start) = best?;
        let text = &chart.text[start..];
        let close = match &self.compiled().budgets[budget as usize].close {
            Some(Close::Text(s)) => {
                // The longest end of the text that begins the close.
                let k = (1..=s.len().min(text.len())).rev().find(|&k| text.ends_with(&s.as_bytes()[..k])).unwrap_or(0);
                String::from_utf8_lossy(&s.as_bytes()[k..]).into_owned()
            }
            _ => String::new(),
        };
        Some(BudgetPosition { budget, start, close })
    }
}
