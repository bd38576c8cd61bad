//! # stencil-python
//!
//! The native module `stencil._stencil`: Stencil's engine for Python serving stacks. The
//! Python package `stencil` (in `python/stencil/`) re-exports it and adds the numpy and
//! torch helpers and the transformers, vLLM and SGLang adapters.
//!
//! - `vocab.rs`: `Vocab`, a tokenizer's vocabulary (GGUF, `tokenizer.json`, a transformers
//!   tokenizer, raw token bytes).
//! - `compile.rs`: `Compiler` (JSON Schema, GBNF, regex, tool sets, any JSON) and the
//!   immutable `Grammar` it makes.
//! - `matcher.rs`: `Matcher`, one sequence's parse state, and the batch fill.
//! - `buffer.rs`: bitmask rows in numpy arrays and torch tensors (the int32 layout
//!   XGrammar and llguidance use).
//! - `errors.rs`: the exception classes.
//!
//! Every call that computes (compiling, masks, warm-up) releases the GIL; no input can
//! crash the interpreter: errors are exceptions with the engine's located message.

use pyo3::prelude::*;

mod buffer;
mod compile;
mod errors;
mod matcher;
mod vocab;

/// `ceil(vocab_size / 32)`: the int32 words of one bitmask row.
#[pyfunction]
fn bitmask_words(vocab_size: usize) -> usize {
    stencil_mask::bitmask::words(vocab_size)
}

#[pymodule]
fn _stencil(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<vocab::PyVocab>()?;
    m.add_class::<compile::PyGrammar>()?;
    m.add_class::<compile::PyCompiler>()?;
    m.add_class::<matcher::PyMatcher>()?;
    m.add_function(wrap_pyfunction!(matcher::fill_next_token_bitmask_batch, m)?)?;
    m.add_function(wrap_pyfunction!(bitmask_words, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
