//! # stencil-grammar
//!
//! The grammar intermediate representation ([`Grammar`], [`Expr`]) that every front end
//! targets, the GBNF front end ([`parse_gbnf`]) and printer ([`to_gbnf`]), the rewrites
//! that fit a grammar to llama.cpp's parser ([`llama_cpp`]), and a slow,
//! obviously-correct [`reference`](mod@reference) recognizer used as a test oracle.

mod caret;
mod ir;
pub mod llama_cpp;
mod lower;
mod parse;
mod print;
pub mod random;
pub mod reference;

pub use caret::caret_window;
pub use ir::*;
pub use lower::{lower_regexes, LowerError};
pub use parse::{
    parse_gbnf, parse_gbnf_bytes, parse_gbnf_bytes_with, parse_gbnf_with, GbnfError, ParseOptions, MAX_REPETITION_MIN,
};
pub use print::{is_gbnf_name, to_gbnf, PrintError};
