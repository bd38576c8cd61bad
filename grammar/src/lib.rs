//! # stencil-grammar
//!
//! The grammar intermediate representation ([`Grammar`], [`Expr`]) that every front end
//! targets, the GBNF front end ([`parse_gbnf`]) and printer ([`to_gbnf`]), and a slow,
//! obviously-correct [`reference`] recognizer used as a test oracle.

mod ir;

pub use ir::*;
