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
//! - `matcher.rs`: `Matcher`, one sequence's parse state (consume, validate, rollback,
//!   fork, forced tokens, bitmask fills with the GIL released), and the batch fill (rows in
//!   order for 50 µs, so warm masks never pay the pool's dispatch, then the rest on the
//!   thread pool).
//! - `buffer.rs`: bitmask rows in numpy arrays and torch tensors (the int32 layout
//!   XGrammar and llguidance use), checked once per call.
//! - `errors.rs`: the exception classes.
//!
//! Every call that computes (compiling, masks, warm-up) releases the GIL; no input can
//! crash the interpreter: errors are exceptions with the engine's located message.
//!
//! One abi3 wheel for CPython 3.10 and later, built by maturin (`scripts/build-python.sh`,
//! or `pip install ./python`); tested by `scripts/test-python.sh` (pytest over
//! `python/tests/`), measured by `scripts/bench-python.sh`. See `python/README.md`.

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
