//! A selection's slices as numbers, in one call: each chunk's tuple of slices of a zarr read becomes
//! `(start, count, step)` per axis, as Python's `slice.indices` resolves them.
//!
//! Why: a read of thousands of chunks has two tuples of slices per chunk (the chunk's part, the output's
//! part); resolving each slice in Python costs about a microsecond, most of the pipeline's planning.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PySequence, PySlice, PyTuple};

/// `(start, count, step)` of each axis of each of `sels` (tuples of slices, each over `shape`), as one
/// `bytes` of native-endian int64 laid out `[item][axis][start, count, step]`; see `gdsstore/_core.pyi`.
#[pyfunction]
pub fn slice_table<'py>(
    py: Python<'py>,
    sels: &Bound<'py, PySequence>,
    shape: Vec<isize>,
) -> PyResult<Bound<'py, PyBytes>> {
    let n = sels.len()?;
    let nd = shape.len();
    let mut out: Vec<u8> = Vec::with_capacity(n * nd * 3 * 8);
    for i in 0..n {
        let item = sels.get_item(i)?;
        let sel = item
            .downcast::<PyTuple>()
            .map_err(|_| not_slices(i, &item))?;
        if sel.len() != nd {
            return Err(PyTypeError::new_err(format!(
                "slice_table(): selection {i} has {} axes, the shape {nd}",
                sel.len()
            )));
        }
        for (axis, &len) in shape.iter().enumerate() {
            let part = sel.get_item(axis)?;
            let sl = part
                .downcast::<PySlice>()
                .map_err(|_| not_slices(i, &item))?;
            let ix = sl.indices(len)?;
            for v in [ix.start as i64, ix.slicelength as i64, ix.step as i64] {
                out.extend_from_slice(&v.to_ne_bytes());
            }
        }
    }
    Ok(PyBytes::new(py, &out))
}

fn not_slices(i: usize, item: &Bound<'_, PyAny>) -> PyErr {
    let kind = item
        .get_type()
        .name()
        .map_or_else(|_| "?".to_string(), |n| n.to_string());
    PyTypeError::new_err(format!(
        "slice_table(): selection {i} is a {kind}, not a tuple of slices"
    ))
}
