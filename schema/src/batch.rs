//! Schemas compiled one after another into one grammar of the caller's, sharing what they
//! have in common: the rules every schema uses (whitespace, any JSON value, property keys,
//! the ends of strings and of "any other key") are written once, and translated patterns
//! and escaped string contents are computed once. A tool set's schemas repeat these in
//! every tool; compiled apart, each brought its own copies for the engine to find equal.
//!
//! Invariant: each schema's language is the one [`crate::compile_schema`] gives it (the
//! shared rules are the same rules, by name only different). After an error the rules
//! that compile added are taken out of the grammar and the batch starts over, its names
//! under a new prefix, so no rule it kept refers to a rule that is gone.

use serde_json::Value;
use stencil_grammar::{Grammar, RuleId};

use crate::compile::{compile_document, Shared};
use crate::{SchemaError, SchemaOptions, Unenforced};

/// Compiles schemas, one options for all, into grammars of the caller's.
///
/// ```
/// use serde_json::json;
/// use stencil_grammar::{Expr, Grammar};
/// use stencil_schema::{SchemaBatch, SchemaOptions};
///
/// let mut g = Grammar::new();
/// let mut batch = SchemaBatch::new(SchemaOptions::compact(), "s-");
/// let (a, _) = batch.compile(&json!({"type": "object"}), &mut g).unwrap();
/// let (b, _) = batch.compile(&json!({"type": "array"}), &mut g).unwrap();
/// g.root = g.add_rule("root", Expr::Alt(vec![Expr::Rule(a), Expr::Rule(b)]));
/// // "any value", inside both, is one rule.
/// assert_eq!(g.rules.iter().filter(|r| r.name == "s-any").count(), 1);
/// ```
pub struct SchemaBatch {
    options: SchemaOptions,
    prefix: String,
    /// Starts after an error (see the module doc), each under its own prefix.
    restarts: u32,
    /// The shared state, its grammar empty between compiles (`None` before the first).
    shared: Option<Shared>,
}

impl SchemaBatch {
    /// A batch compiling with `options`; every rule it writes is named after `prefix`,
    /// which must set its names apart from the other rules of the grammars it writes into.
    pub fn new(options: SchemaOptions, prefix: impl Into<String>) -> SchemaBatch {
        SchemaBatch { options, prefix: prefix.into(), restarts: 0, shared: None }
    }

    /// Compiles `schema` into `g` (whose root is left as it is): the rule of its valid
    /// instances' JSON text and the keywords it leaves unenforced. Always the same `g`,
    /// or the rules shared with earlier schemas are missing from it.
    pub fn compile(&mut self, schema: &Value, g: &mut Grammar) -> Result<(RuleId, Vec<Unenforced>), SchemaError> {
        let first_rule = g.rules.len();
        let shared = match self.shared.take() {
            Some(mut shared) => {
                shared.out.g = std::mem::take(g);
                shared
            }
            None => {
                let prefix = match self.restarts {
                    0 => self.prefix.clone(),
                    n => format!("{}{n}-", self.prefix),
                };
                Shared::new(std::mem::take(g), prefix, &self.options)
            }
        };
        let (mut shared, result) = compile_document(schema, &self.options, shared);
        *g = std::mem::take(&mut shared.out.g);
        match result {
            Ok(compiled) => {
                self.shared = Some(shared);
                Ok(compiled)
            }
            Err(e) => {
                g.rules.truncate(first_rule);
                self.restarts += 1;
                Err(e)
            }
        }
    }
}
