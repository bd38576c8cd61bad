//! Bitmask rows in caller-owned memory: a C-contiguous int32 numpy array or CPU torch
//! tensor of shape `(rows, words)` or `(words,)`, in XGrammar's and llguidance's layout
//! (bit `t % 32` of word `t / 32` set = token `t` allowed).
//!
//! The buffer is checked once, under the GIL (type, dtype, device, contiguity, writability,
//! width, alignment); the rows are then plain `&mut [u32]` that fills write with the GIL
//! released. The caller's object stays referenced for the whole call, so its memory
//! cannot be freed meanwhile.

use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// A checked view of a bitmask buffer.
pub struct MaskRows {
    address: usize,
    rows: usize,
    words: usize,
}

impl MaskRows {
    /// Checks `buffer` and that its rows hold at least `needed_words` words.
    pub fn from_py(buffer: &Bound<'_, PyAny>, needed_words: usize) -> PyResult<MaskRows> {
        let py = buffer.py();
        let (address, shape) = if buffer.hasattr(pyo3::intern!(py, "data_ptr"))? {
            torch_view(buffer)?
        } else if let Ok(interface) = buffer.getattr(pyo3::intern!(py, "__array_interface__")) {
            numpy_view(&interface)?
        } else {
            return Err(PyTypeError::new_err(format!(
                "the bitmask must be an int32 numpy array or torch tensor, not {}",
                buffer.get_type().name()?
            )));
        };
        let (rows, words) = match shape[..] {
            [words] => (1, words),
            [rows, words] => (rows, words),
            _ => return Err(PyValueError::new_err(format!("the bitmask must be 1-D or 2-D, not of shape {shape:?}"))),
        };
        if words < needed_words {
            return Err(PyValueError::new_err(format!(
                "bitmask rows of {words} words are too narrow: the vocabulary needs {needed_words} (ceil(vocab.size / 32))"
            )));
        }
        if rows > 0 && address % std::mem::align_of::<u32>() != 0 {
            return Err(PyValueError::new_err("the bitmask's data is not aligned to 4 bytes"));
        }
        Ok(MaskRows { address, rows, words })
    }

    /// Row `index`, checked against the buffer's rows.
    pub fn row(&mut self, index: usize) -> PyResult<&mut [u32]> {
        self.check(index)?;
        // SAFETY: checked above; `&mut self` makes this the only row handed out.
        Ok(unsafe { self.slice(index) })
    }

    /// Distinct rows `indices[i]`, one per index; an index may appear once only.
    pub fn rows(&mut self, indices: &[usize]) -> PyResult<Vec<&mut [u32]>> {
        let mut seen = vec![false; self.rows];
        for &i in indices {
            self.check(i)?;
            if std::mem::replace(&mut seen[i], true) {
                return Err(PyValueError::new_err(format!("bitmask row {i} is named twice")));
            }
        }
        // SAFETY: checked above; the indices are distinct, so the rows do not overlap, and
        // `&mut self` keeps any other row from being handed out meanwhile.
        Ok(indices.iter().map(|&i| unsafe { self.slice(i) }).collect())
    }

    /// Row `index` as a slice.
    ///
    /// # Safety
    /// `index < self.rows`, and no other live slice of the same row. `from_py` checked
    /// that the buffer is a writable, C-contiguous, aligned array of `rows * words` 32-bit
    /// words, and the caller's object outlives the call.
    unsafe fn slice<'a>(&self, index: usize) -> &'a mut [u32] {
        std::slice::from_raw_parts_mut((self.address as *mut u32).add(index * self.words), self.words)
    }

    fn check(&self, index: usize) -> PyResult<()> {
        if index < self.rows {
            Ok(())
        } else {
            Err(PyIndexError::new_err(format!(
                "bitmask row {index} is out of range: the bitmask has {} rows",
                self.rows
            )))
        }
    }
}

/// A torch tensor: int32, on the CPU, contiguous.
fn torch_view(t: &Bound<'_, PyAny>) -> PyResult<(usize, Vec<usize>)> {
    let py = t.py();
    let dtype = t.getattr(pyo3::intern!(py, "dtype"))?.str()?.to_string();
    if dtype != "torch.int32" {
        return Err(PyTypeError::new_err(format!("the bitmask tensor must be torch.int32, not {dtype}")));
    }
    let device = t.getattr(pyo3::intern!(py, "device"))?.getattr(pyo3::intern!(py, "type"))?.str()?.to_string();
    if device != "cpu" {
        return Err(PyValueError::new_err(format!(
            "the bitmask tensor is on {device}: fill a CPU tensor, then copy it to the device"
        )));
    }
    if !t.call_method0(pyo3::intern!(py, "is_contiguous"))?.extract::<bool>()? {
        return Err(PyValueError::new_err("the bitmask tensor must be contiguous"));
    }
    let shape: Vec<usize> = t.getattr(pyo3::intern!(py, "shape"))?.extract()?;
    let address: usize = t.call_method0(pyo3::intern!(py, "data_ptr"))?.extract()?;
    Ok((address, shape))
}

/// A numpy array (or anything with the array interface), given its `__array_interface__`:
/// int32 or uint32, writable, C-contiguous.
fn numpy_view(interface: &Bound<'_, PyAny>) -> PyResult<(usize, Vec<usize>)> {
    let interface =
        interface.cast::<PyDict>().map_err(|_| PyTypeError::new_err("__array_interface__ is not a dict"))?;
    let get = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        interface.get_item(key)?.ok_or_else(|| PyTypeError::new_err(format!("__array_interface__ lacks {key:?}")))
    };
    let typestr: String = get("typestr")?.extract()?;
    if !matches!(typestr.as_str(), "<i4" | "<u4" | "|i4" | "|u4" | "=i4" | "=u4") {
        return Err(PyTypeError::new_err(format!(
            "the bitmask array must be int32 (little-endian), not of type {typestr:?}"
        )));
    }
    let (address, read_only): (usize, bool) = get("data")?.extract()?;
    if read_only {
        return Err(PyValueError::new_err("the bitmask array is read-only"));
    }
    let shape: Vec<usize> = get("shape")?.extract()?;
    let strides: Option<Vec<isize>> = interface.get_item("strides")?.map(|s| s.extract()).transpose()?.flatten();
    if let Some(strides) = strides {
        let mut expected = 4isize;
        for (&dim, &stride) in shape.iter().zip(&strides).rev() {
            if dim > 1 && stride != expected {
                return Err(PyValueError::new_err("the bitmask array must be C-contiguous"));
            }
            expected *= dim as isize;
        }
    }
    Ok((address, shape))
}
