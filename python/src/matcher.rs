//! `Matcher`: one sequence's parse state (accept, validate, rollback, fork, masks), and
//! the batch fill over many matchers on the engine's thread pool.

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rayon::prelude::*;
use stencil_mask::{bitmask, MatchError, Matcher};

use crate::buffer::MaskRows;
use crate::compile::PyGrammar;
use crate::errors::match_error;

/// The parse state of one sequence against a compiled grammar. Not for concurrent use:
/// give each thread its own (`fork` is cheap). Mask fills release the GIL.
///
/// ```python
/// matcher = stencil.Matcher(grammar)
/// bitmask = stencil.allocate_token_bitmask(1, vocab.size)
/// matcher.fill_next_token_bitmask(bitmask, 0)
/// assert matcher.consume_token(token)
/// ```
#[pyclass(name = "Matcher", module = "stencil._stencil")]
pub struct PyMatcher {
    inner: Matcher,
    grammar: Py<PyGrammar>,
}

/// Accepts `token` if the grammar allows it: `Ok(false)` (and no change) for a refused
/// token, an id outside the vocabulary or a terminated matcher; an engine limit is the
/// error.
fn try_accept(m: &mut Matcher, token: i64) -> Result<bool, MatchError> {
    let Ok(token) = u32::try_from(token) else { return Ok(false) };
    match m.accept_token(token) {
        Ok(()) => Ok(true),
        Err(e @ MatchError::LimitExceeded { .. }) => Err(e),
        Err(_) => Ok(false),
    }
}

impl PyMatcher {
    fn words(&self) -> usize {
        bitmask::words(self.inner.grammar().vocab().mask_width())
    }
}

#[pymethods]
impl PyMatcher {
    #[new]
    fn new(grammar: Py<PyGrammar>) -> Self {
        let inner = Matcher::new(grammar.get().compiled.clone());
        PyMatcher { inner, grammar }
    }

    /// The grammar it matches.
    #[getter]
    fn grammar(&self, py: Python<'_>) -> Py<PyGrammar> {
        self.grammar.clone_ref(py)
    }

    /// Tokens accepted so far (EOS included).
    #[getter]
    fn num_tokens(&self) -> usize {
        self.inner.tokens_accepted()
    }

    /// Accepts `token`; False (and no change) when the grammar does not allow it, the id
    /// is outside the vocabulary, or the matcher is terminated.
    fn consume_token(&mut self, py: Python<'_>, token: i64) -> PyResult<bool> {
        let inner = &mut self.inner;
        py.detach(|| try_accept(inner, token)).map_err(match_error)
    }

    /// Accepts all of `tokens` or none: False (and no change) when one is refused.
    fn consume_tokens(&mut self, py: Python<'_>, tokens: Vec<i64>) -> PyResult<bool> {
        let inner = &mut self.inner;
        py.detach(|| {
            for (i, &t) in tokens.iter().enumerate() {
                match try_accept(inner, t) {
                    Ok(true) => {}
                    other => {
                        inner.rollback(i).expect("rolling back tokens just accepted");
                        return other;
                    }
                }
            }
            Ok(true)
        })
        .map_err(match_error)
    }

    /// How many leading tokens of `tokens` the grammar accepts from here, without
    /// advancing (speculative decoding's draft check).
    fn validate_tokens(&mut self, py: Python<'_>, tokens: Vec<i64>) -> PyResult<usize> {
        let inner = &mut self.inner;
        py.detach(|| {
            let mut accepted = 0;
            let mut failure = None;
            for &t in &tokens {
                match try_accept(inner, t) {
                    Ok(true) => accepted += 1,
                    Ok(false) => break,
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
            inner.rollback(accepted).expect("rolling back tokens just accepted");
            failure.map_or(Ok(accepted), |e| Err(match_error(e)))
        })
    }

    /// Undoes the last `num_tokens` accepted tokens; MatchError when fewer were accepted.
    fn rollback(&mut self, num_tokens: usize) -> PyResult<()> {
        self.inner.rollback(num_tokens).map_err(match_error)
    }

    /// Back to the start of the grammar.
    fn reset(&mut self) {
        self.inner = Matcher::new(self.grammar.get().compiled.clone());
    }

    /// An independent copy in the same state.
    fn fork(&self, py: Python<'_>) -> PyMatcher {
        PyMatcher { inner: self.inner.fork(), grammar: self.grammar.clone_ref(py) }
    }

    /// True once an EOS id was accepted.
    fn is_terminated(&self) -> bool {
        self.inner.is_ended()
    }

    /// True when the output so far is a complete sentence (EOS is allowed next), or the
    /// matcher is terminated.
    fn is_accepting(&self) -> bool {
        self.inner.is_ended() || self.inner.can_end()
    }

    /// Tokens the grammar forces next (spelling at most `limit` bytes), safe to append
    /// without sampling.
    #[pyo3(signature = (limit = 64))]
    fn forced_tokens(&mut self, py: Python<'_>, limit: usize) -> Vec<u32> {
        let inner = &mut self.inner;
        py.detach(|| inner.forced_tokens(limit))
    }

    /// The bytes (at most `limit`) every continuation starts with.
    #[pyo3(signature = (limit = 256))]
    fn forced_bytes<'py>(&mut self, py: Python<'py>, limit: usize) -> Bound<'py, PyBytes> {
        let inner = &mut self.inner;
        let bytes = py.detach(|| inner.forced_bytes(limit));
        PyBytes::new(py, &bytes)
    }

    /// Writes the next token's allowed-token bitmask into row `index` of `bitmask` (an
    /// int32 numpy array or CPU torch tensor, `(rows, ceil(V/32))` or `(ceil(V/32),)`).
    /// A terminated matcher writes an all-zero row.
    #[pyo3(signature = (bitmask, index = 0))]
    fn fill_next_token_bitmask(&mut self, py: Python<'_>, bitmask: &Bound<'_, PyAny>, index: usize) -> PyResult<()> {
        let mut rows = MaskRows::from_py(bitmask, self.words())?;
        let row = rows.row(index)?;
        let inner = &mut self.inner;
        py.detach(|| inner.fill_mask(row)).map_err(match_error)
    }

    /// The allowed token ids of the next step.
    fn next_token_mask(&mut self, py: Python<'_>) -> PyResult<Vec<u32>> {
        let mut mask = bitmask::new_mask(self.inner.grammar().vocab().mask_width());
        let inner = &mut self.inner;
        py.detach(|| inner.fill_mask(&mut mask)).map_err(match_error)?;
        Ok(bitmask::allowed(&mask).collect())
    }

    fn __repr__(&self) -> String {
        format!(
            "Matcher(tokens={}, accepting={}, terminated={})",
            self.inner.tokens_accepted(),
            self.is_accepting(),
            self.inner.is_ended()
        )
    }
}

/// Fills row `indices[i]` (default `i`) of `bitmask` for `matchers[i]`, all in parallel
/// on the engine's thread pool with the GIL released.
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, indices = None))]
pub fn fill_next_token_bitmask_batch(
    py: Python<'_>,
    mut matchers: Vec<PyRefMut<'_, PyMatcher>>,
    bitmask: &Bound<'_, PyAny>,
    indices: Option<Vec<usize>>,
) -> PyResult<()> {
    let indices = indices.unwrap_or_else(|| (0..matchers.len()).collect());
    if indices.len() != matchers.len() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "{} matchers but {} row indices",
            matchers.len(),
            indices.len()
        )));
    }
    let needed = matchers.iter().map(|m| m.words()).max().unwrap_or(0);
    let mut buffer = MaskRows::from_py(bitmask, needed)?;
    let rows = buffer.rows(&indices)?;
    let mut work: Vec<(&mut Matcher, &mut [u32])> = matchers.iter_mut().map(|m| &mut m.inner).zip(rows).collect();
    py.detach(|| fill_adaptively(&mut work)).map_err(match_error)
}

/// Serial work after which the rest of a batch goes to the thread pool: warm masks take
/// a few microseconds, about what handing one to another thread costs.
const SERIAL_BUDGET: std::time::Duration = std::time::Duration::from_micros(50);

/// Fills the rows in order until [`SERIAL_BUDGET`] is spent, then the rest in parallel: a
/// batch of warm masks never pays the pool's dispatch, a batch with cold ones still
/// spreads them over the cores.
fn fill_adaptively(work: &mut [(&mut Matcher, &mut [u32])]) -> Result<(), MatchError> {
    let start = std::time::Instant::now();
    for i in 0..work.len() {
        if start.elapsed() > SERIAL_BUDGET && work.len() - i > 1 {
            return work[i..].par_iter_mut().try_for_each(|(m, row)| m.fill_mask(row));
        }
        let (m, row) = &mut work[i];
        m.fill_mask(row)?;
    }
    Ok(())
}
