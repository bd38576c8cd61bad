//! `Vocab`: token id → bytes, the EOS ids and the mask width, from a GGUF file, a
//! `tokenizer.json`, a transformers tokenizer or raw token bytes.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use stencil_mask::{TokenKind, Vocabulary};

use crate::errors::vocab_error;

/// A tokenizer's vocabulary as the engine sees it. Immutable; share one between
/// compilers and threads.
///
/// ```python
/// vocab = stencil.Vocab.from_gguf("model.gguf")
/// vocab = stencil.Vocab.from_huggingface(tokenizer, vocab_size=model.config.vocab_size)
/// ```
#[pyclass(frozen, name = "Vocab", module = "stencil._stencil")]
pub struct PyVocab {
    pub inner: Arc<Vocabulary>,
}

/// Widens `vocab` to the model's logits width, when one is given.
fn widened(vocab: Vocabulary, vocab_size: Option<usize>) -> PyResult<Vocabulary> {
    match vocab_size {
        Some(width) => vocab.with_mask_width(width).map_err(vocab_error),
        None => Ok(vocab),
    }
}

fn wrap(vocab: Vocabulary) -> PyVocab {
    PyVocab { inner: Arc::new(vocab) }
}

#[pymethods]
impl PyVocab {
    /// The vocabulary stored in a GGUF model file (token texts and types, and the
    /// end-of-generation ids llama.cpp would use).
    #[staticmethod]
    #[pyo3(signature = (path, vocab_size = None))]
    fn from_gguf(py: Python<'_>, path: std::path::PathBuf, vocab_size: Option<usize>) -> PyResult<PyVocab> {
        let vocab =
            py.detach(|| Vocabulary::from_gguf(&path)).map_err(|e| vocab_error(format!("{}: {e}", path.display())))?;
        widened(vocab, vocab_size).map(wrap)
    }

    /// From the text of a Hugging Face `tokenizer.json`; without `eos_ids` the
    /// end-of-generation tokens are found by name.
    #[staticmethod]
    #[pyo3(signature = (json, eos_ids = None, vocab_size = None))]
    fn from_tokenizer_json(
        py: Python<'_>,
        json: &str,
        eos_ids: Option<Vec<u32>>,
        vocab_size: Option<usize>,
    ) -> PyResult<PyVocab> {
        let vocab = py.detach(|| Vocabulary::from_tokenizer_json_str(json, eos_ids.as_deref())).map_err(vocab_error)?;
        widened(vocab, vocab_size).map(wrap)
    }

    /// From a transformers fast tokenizer (its `backend_tokenizer.to_str()`). EOS:
    /// `eos_ids`, else the tokenizer's `eos_token_id` and the end-of-generation tokens
    /// found by name. `vocab_size`: the model's logits width.
    #[staticmethod]
    #[pyo3(signature = (tokenizer, vocab_size = None, eos_ids = None))]
    fn from_huggingface(
        py: Python<'_>,
        tokenizer: &Bound<'_, PyAny>,
        vocab_size: Option<usize>,
        eos_ids: Option<Vec<u32>>,
    ) -> PyResult<PyVocab> {
        let backend = tokenizer.getattr("backend_tokenizer").map_err(|_| {
            vocab_error("the tokenizer has no `backend_tokenizer`: Vocab.from_huggingface needs a fast tokenizer (use_fast=True)")
        })?;
        let json: String = backend.call_method0("to_str")?.extract()?;
        let vocab = match eos_ids {
            Some(ids) => py.detach(|| Vocabulary::from_tokenizer_json_str(&json, Some(&ids))),
            None => {
                let tokenizer_eos: Option<u32> = tokenizer.getattr("eos_token_id").ok().and_then(|v| v.extract().ok());
                py.detach(|| {
                    let by_name = Vocabulary::from_tokenizer_json_str(&json, None);
                    let mut ids = match &by_name {
                        Ok(v) => v.eos_ids().to_vec(),
                        Err(_) => Vec::new(),
                    };
                    match tokenizer_eos {
                        Some(id) if !ids.contains(&id) => {
                            ids.push(id);
                            Vocabulary::from_tokenizer_json_str(&json, Some(&ids))
                        }
                        _ => by_name,
                    }
                })
            }
        }
        .map_err(vocab_error)?;
        widened(vocab, vocab_size).map(wrap)
    }

    /// From raw token bytes per id (`None`: an unused id). `special_ids` and `eos_ids` are
    /// control tokens: they never match grammar text.
    #[staticmethod]
    #[pyo3(signature = (tokens, eos_ids, special_ids = Vec::new(), vocab_size = None))]
    fn from_tokens(
        tokens: Vec<Option<Vec<u8>>>,
        eos_ids: Vec<u32>,
        special_ids: Vec<u32>,
        vocab_size: Option<usize>,
    ) -> PyResult<PyVocab> {
        let mut table: Vec<(Vec<u8>, TokenKind)> = tokens
            .into_iter()
            .map(|t| match t {
                Some(bytes) => (bytes, TokenKind::Normal),
                None => (Vec::new(), TokenKind::Unused),
            })
            .collect();
        let len = table.len();
        if let Some(id) = special_ids.iter().find(|&&id| id as usize >= len) {
            return Err(vocab_error(format!("special token id {id} is outside the vocabulary of {len} tokens")));
        }
        // EOS ids out of range are the engine's error, below.
        for &id in special_ids.iter().chain(&eos_ids) {
            if let Some(entry) = table.get_mut(id as usize) {
                entry.1 = TokenKind::Control;
            }
        }
        let vocab = Vocabulary::new(table, eos_ids).map_err(vocab_error)?;
        widened(vocab, vocab_size).map(wrap)
    }

    /// The mask width: bits per bitmask row (at least `len(vocab)`).
    #[getter]
    fn size(&self) -> usize {
        self.inner.mask_width()
    }

    /// The end-of-generation token ids.
    #[getter]
    fn eos_ids(&self) -> Vec<u32> {
        self.inner.eos_ids().to_vec()
    }

    /// The bytes of `token` (empty for control and unused tokens' absent text).
    fn token_bytes<'py>(&self, py: Python<'py>, token: u32) -> PyResult<Bound<'py, PyBytes>> {
        self.check(token)?;
        Ok(PyBytes::new(py, self.inner.token_bytes(token)))
    }

    /// True when the token can match grammar text (not a control or unused token).
    fn is_text(&self, token: u32) -> PyResult<bool> {
        self.check(token)?;
        Ok(self.inner.is_text(token))
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "Vocab(tokens={}, size={}, eos_ids={:?})",
            self.inner.len(),
            self.inner.mask_width(),
            self.inner.eos_ids()
        )
    }
}

impl PyVocab {
    fn check(&self, token: u32) -> PyResult<()> {
        if (token as usize) < self.inner.len() {
            Ok(())
        } else {
            Err(pyo3::exceptions::PyIndexError::new_err(format!(
                "token {token} is outside the vocabulary of {} tokens",
                self.inner.len()
            )))
        }
    }
}
