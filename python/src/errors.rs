//! The exception classes: `StencilError` and one subclass per kind of failure.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(_stencil, StencilError, PyException, "Base class of every error the engine raises.");
create_exception!(
    _stencil,
    VocabError,
    StencilError,
    "A vocabulary could not be read (bad GGUF, bad tokenizer.json, no EOS id...)."
);
create_exception!(
    _stencil,
    CompileError,
    StencilError,
    "A grammar, schema, regex or tool set could not be compiled; the message locates the problem."
);
create_exception!(
    _stencil,
    MatchError,
    StencilError,
    "A matcher hit an engine limit or was misused (rolling back more tokens than it accepted)."
);

/// A `VocabError` with `err`'s message.
pub fn vocab_error(err: impl std::fmt::Display) -> PyErr {
    VocabError::new_err(err.to_string())
}

/// A `CompileError` with `err`'s message.
pub fn compile_error(err: impl std::fmt::Display) -> PyErr {
    CompileError::new_err(err.to_string())
}

/// A `MatchError` with `err`'s message.
pub fn match_error(err: impl std::fmt::Display) -> PyErr {
    MatchError::new_err(err.to_string())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("StencilError", py.get_type::<StencilError>())?;
    m.add("VocabError", py.get_type::<VocabError>())?;
    m.add("CompileError", py.get_type::<CompileError>())?;
    m.add("MatchError", py.get_type::<MatchError>())?;
    Ok(())
}
