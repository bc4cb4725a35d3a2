//! Items of one buffer as separate `bytes` objects, copied on several threads with the GIL released.
//!
//! Why: fsspec's `cat` must return one `bytes` per file. Copied one by one under the GIL, each new object's
//! memory is first touched (page faults) by the copy, serially: measured on a 16-core machine, 4,096 objects
//! of 16 KiB took 0.10 s beside a 0.04 s wave. Here the objects are made under the GIL (their memory not
//! yet written), then filled by `threads` threads at once, before any Python code can see them.

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;

/// A copy to make: `n` bytes from `src` to `dst` (addresses, so the jobs cross threads).
#[derive(Clone, Copy)]
struct Job {
    src: usize,
    dst: usize,
    n: usize,
}

fn copy_all(jobs: &[Job], threads: usize) {
    let total: usize = jobs.iter().map(|j| j.n).sum();
    let per = total.div_ceil(threads.max(1)).max(1);
    // Consecutive runs of about `per` bytes, one run a thread.
    let mut runs: Vec<&[Job]> = Vec::new();
    let (mut start, mut acc) = (0, 0);
    for (i, j) in jobs.iter().enumerate() {
        acc += j.n;
        if acc >= per {
            runs.push(&jobs[start..=i]);
            start = i + 1;
            acc = 0;
        }
    }
    if start < jobs.len() {
        runs.push(&jobs[start..]);
    }
    std::thread::scope(|s| {
        for run in runs {
            s.spawn(move || {
                for j in run {
                    // SAFETY: `src` lies inside the caller's buffer (checked), `dst` is a fresh bytes object of
                    // `n` bytes that no other code holds yet; the spans never overlap.
                    unsafe {
                        std::ptr::copy_nonoverlapping(j.src as *const u8, j.dst as *mut u8, j.n)
                    };
                }
            });
        }
    });
}

/// `bytes` of `buffer[offsets[i]:offsets[i] + sizes[i]]` each (`None` where `sizes[i] < 0`).
pub fn split(
    py: Python<'_>,
    buffer: &Bound<'_, PyAny>,
    offsets: &[i64],
    sizes: &[i64],
    threads: usize,
) -> PyResult<Vec<PyObject>> {
    if offsets.len() != sizes.len() {
        return Err(PyValueError::new_err(
            "split_bytes(): `offsets` and `sizes` must have one entry per item",
        ));
    }
    let buf = crate::readable("split_bytes()", "buffer", buffer)?;
    let (base, len) = (buf.buf_ptr() as usize, buf.len_bytes());
    let mut out: Vec<PyObject> = Vec::with_capacity(sizes.len());
    let mut jobs: Vec<Job> = Vec::with_capacity(sizes.len());
    for (&o, &n) in offsets.iter().zip(sizes) {
        if n < 0 {
            out.push(py.None());
            continue;
        }
        let (o, n) = (o as usize, n as usize);
        if o.checked_add(n).is_none_or(|e| e > len) {
            return Err(PyValueError::new_err(format!(
                "split_bytes(): item {o}+{n} outside the buffer of {len} bytes"
            )));
        }
        // SAFETY: a new bytes object of `n` bytes, contents not yet set (filled below, before it is returned).
        let obj = unsafe { ffi::PyBytes_FromStringAndSize(std::ptr::null(), n as ffi::Py_ssize_t) };
        if obj.is_null() {
            return Err(PyErr::fetch(py));
        }
        // SAFETY: `obj` is a bytes object we own; its storage is `n` bytes long.
        let dst = unsafe { ffi::PyBytes_AsString(obj) } as usize;
        out.push(unsafe { PyObject::from_owned_ptr(py, obj) });
        jobs.push(Job {
            src: base + o,
            dst,
            n,
        });
    }
    // `buf` (and so the memory it exports) stays alive until the copies are done.
    py.allow_threads(|| copy_all(&jobs, threads));
    drop(buf);
    Ok(out)
}
