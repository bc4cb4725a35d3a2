//! The caller's buffers, and the one place the core touches their memory. A call holds the Python buffer
//! (`Held`) until its work is over, interrupted or not; the work gets `Slot`s (checked inside the buffer and
//! disjoint before the work starts, one owner each) to write into, or a `Source` to copy out of, each access
//! checked against its bounds. Every `unsafe` block of the crate is in this module. The caller's columns
//! (int64 arrays of one value per item: offsets, sizes, counts written back) are read and written here too.
#![allow(unsafe_code)]

use bytes::Bytes;
use pyo3::buffer::PyBuffer;
use pyo3::ffi;
use pyo3::prelude::*;

use crate::error::CallError;

/// A one-dimensional int64 array's values, `n` of them.
pub fn int64s(
    py: Python<'_>,
    who: &str,
    what: &str,
    obj: &Bound<'_, PyAny>,
    n: usize,
) -> PyResult<Vec<i64>> {
    let vals = PyBuffer::<i64>::get(obj)?.to_vec(py)?;
    if vals.len() != n {
        return Err(CallError::Args(format!("{who}: {n} paths but {} {what}", vals.len())).into());
    }
    Ok(vals)
}

/// The values as `usize`, each checked `>= 0`.
pub fn nonneg(who: &str, what: &str, vals: Vec<i64>) -> Result<Vec<usize>, CallError> {
    match vals.iter().find(|v| **v < 0) {
        Some(v) => Err(CallError::Args(format!("{who}: negative {what} {v}"))),
        None => Ok(vals.into_iter().map(|v| v as usize).collect()),
    }
}

/// A failed item as Python receives it: `(index, kind, HTTP status or errno, message)`.
pub type ItemError = (usize, &'static str, i32, String);

/// An int64 array `what` of `n` items that the core writes one count per item into.
pub fn counts_out(
    who: &str,
    what: &str,
    obj: &Bound<'_, PyAny>,
    n: usize,
) -> PyResult<PyBuffer<i64>> {
    let out = PyBuffer::<i64>::get(obj)?;
    if out.readonly() || out.item_count() != n {
        return Err(CallError::Args(format!(
            "{who}: `{what}` must be a writable int64 array of {n} items"
        ))
        .into());
    }
    Ok(out)
}

/// A C-contiguous byte buffer of the caller, exported (its memory kept in place) while this is alive.
pub struct Held(PyBuffer<u8>);

/// `[start, start + cap)` of a held buffer, written by one owner (never cloned).
pub struct Slot {
    base: usize,
    cap: usize,
}

/// A held buffer's bytes, read by many.
#[derive(Clone, Copy)]
pub struct Source {
    base: usize,
    len: usize,
}

impl Held {
    /// The destination of reads: writable and contiguous.
    pub fn writable(who: &str, what: &str, obj: &Bound<'_, PyAny>) -> PyResult<Held> {
        let buf = PyBuffer::<u8>::get(obj)?;
        if buf.readonly() || !buf.is_c_contiguous() {
            return Err(CallError::Args(format!(
                "{who}: `{what}` must be a writable, contiguous uint8 buffer"
            ))
            .into());
        }
        Ok(Held(buf))
    }

    /// The source of writes and copies: contiguous.
    pub fn readable(who: &str, what: &str, obj: &Bound<'_, PyAny>) -> PyResult<Held> {
        let buf = PyBuffer::<u8>::get(obj)?;
        if !buf.is_c_contiguous() {
            return Err(CallError::Args(format!(
                "{who}: `{what}` must be a contiguous uint8 buffer"
            ))
            .into());
        }
        Ok(Held(buf))
    }

    pub fn len(&self) -> usize {
        self.0.len_bytes()
    }

    /// One slot per `(start, cap)`, in order; they must lie inside the buffer and not overlap (tasks write
    /// them concurrently).
    pub fn slots(&self, who: &str, spans: &[(usize, usize)]) -> Result<Vec<Slot>, CallError> {
        check_disjoint(who, spans, self.len())?;
        let base = self.0.buf_ptr() as usize;
        Ok(spans
            .iter()
            .map(|&(start, cap)| Slot {
                base: base + start,
                cap,
            })
            .collect())
    }

    pub fn source(&self) -> Source {
        Source {
            base: self.0.buf_ptr() as usize,
            len: self.len(),
        }
    }
}

fn check_disjoint(who: &str, spans: &[(usize, usize)], len: usize) -> Result<(), CallError> {
    let mut sorted = spans.to_vec();
    sorted.sort_unstable();
    let mut end = 0usize;
    for (s, c) in sorted {
        let e = s.checked_add(c).filter(|e| *e <= len).ok_or_else(|| {
            CallError::Args(format!(
                "{who}: slot {s}+{c} outside the buffer of {len} bytes"
            ))
        })?;
        if c > 0 && s < end {
            return Err(CallError::Args(format!(
                "{who}: slot at {s} overlaps the one before"
            )));
        }
        end = end.max(e);
    }
    Ok(())
}

impl Slot {
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Write `data` at `at` of the slot; false (nothing written) where it would pass the slot's end.
    pub fn write(&mut self, at: usize, data: &[u8]) -> bool {
        if at.checked_add(data.len()).is_none_or(|e| e > self.cap) {
            return false;
        }
        // SAFETY: [base, base + cap) lies inside a buffer held until the work is over, this slot is its only
        // writer (slots are disjoint and never cloned), and at + len <= cap was checked above.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), (self.base + at) as *mut u8, data.len());
        }
        true
    }

    /// The slot's memory, for a writer that fills it itself (`pread`).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `write`; the borrow of `self` keeps this the slot's only access while it lives.
        unsafe { std::slice::from_raw_parts_mut(self.base as *mut u8, self.cap) }
    }

    /// A slot over `buf`, for the crate's own tests.
    #[cfg(test)]
    pub fn over(buf: &mut [u8], spans: &[(usize, usize)]) -> Vec<Slot> {
        check_disjoint("test", spans, buf.len()).ok().unwrap();
        let base = buf.as_mut_ptr() as usize;
        spans
            .iter()
            .map(|&(s, cap)| Slot {
                base: base + s,
                cap,
            })
            .collect()
    }
}

impl Source {
    /// `[start, start + len)` as an owned body; None where it passes the buffer's end. Copied, not
    /// borrowed: an HTTP client may hold a body past its request's timeout, after the call has returned.
    pub fn copy(&self, start: usize, len: usize) -> Option<Bytes> {
        start.checked_add(len).filter(|e| *e <= self.len)?;
        // SAFETY: [start, start + len) lies inside a buffer held until the work is over (checked above).
        let bytes = unsafe { std::slice::from_raw_parts((self.base + start) as *const u8, len) };
        Some(Bytes::copy_from_slice(bytes))
    }

    /// `[start, start + len)`, borrowed for work that ends before the call returns; None where it passes
    /// the buffer's end.
    pub fn slice(&self, start: usize, len: usize) -> Option<&[u8]> {
        start.checked_add(len).filter(|e| *e <= self.len)?;
        // SAFETY: the span lies inside a buffer held until the work is over (checked above); sources are
        // only read.
        Some(unsafe { std::slice::from_raw_parts((self.base + start) as *const u8, len) })
    }

    /// Copy `[start, start + slot.cap)` into `slot`; false (nothing copied) where it passes the buffer's end.
    pub fn copy_into(&self, start: usize, slot: &mut Slot) -> bool {
        if start.checked_add(slot.cap).is_none_or(|e| e > self.len) {
            return false;
        }
        // SAFETY: the source span lies inside a held buffer (checked above), the slot is its own (see `Slot`).
        let from =
            unsafe { std::slice::from_raw_parts((self.base + start) as *const u8, slot.cap) };
        slot.write(0, from)
    }

    /// A source over `data`, for the crate's own tests.
    #[cfg(test)]
    pub fn over(data: &[u8]) -> Source {
        Source {
            base: data.as_ptr() as usize,
            len: data.len(),
        }
    }
}

/// A new `bytes` object of `n` bytes, its contents not yet set, and the slot that fills it. Python code
/// cannot see the object until it is returned: fill the slot before then.
pub fn new_bytes(py: Python<'_>, n: usize) -> PyResult<(PyObject, Slot)> {
    // SAFETY: a new bytes object of `n` bytes (contents uninitialised until the slot is written).
    let obj = unsafe { ffi::PyBytes_FromStringAndSize(std::ptr::null(), n as ffi::Py_ssize_t) };
    if obj.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: `obj` is a bytes object we own (a new reference); its storage is `n` bytes long and stays in
    // place while the object lives.
    let base = unsafe { ffi::PyBytes_AsString(obj) } as usize;
    let obj = unsafe { PyObject::from_owned_ptr(py, obj) };
    Ok((obj, Slot { base, cap: n }))
}
