//! Items of one buffer as separate `bytes` objects, copied on several threads with the GIL released.
//!
//! Why: fsspec's `cat` must return one `bytes` per file. Copied one by one under the GIL, each new object's
//! memory is first touched (page faults) by the copy, serially. Here the objects are made under the GIL
//! (their memory not yet written), then filled by `threads` threads at once, before any Python code can
//! see them.

use pyo3::prelude::*;

use crate::error::CallError;
use crate::slots::{new_bytes, Held, Slot, Source};

/// A copy to make: bytes from `start` of the source into `dest` (its whole slot).
struct Job {
    start: usize,
    dest: Slot,
}

fn copy_all(from: Source, jobs: Vec<Job>, threads: usize) {
    let total: usize = jobs.iter().map(|j| j.dest.cap()).sum();
    let per = total.div_ceil(threads.max(1)).max(1);
    // Consecutive runs of about `per` bytes, one run a thread.
    let mut runs: Vec<Vec<Job>> = Vec::new();
    let mut run: Vec<Job> = Vec::new();
    let mut acc = 0;
    for j in jobs {
        acc += j.dest.cap();
        run.push(j);
        if acc >= per {
            runs.push(std::mem::take(&mut run));
            acc = 0;
        }
    }
    runs.push(run);
    std::thread::scope(|s| {
        for run in runs.into_iter().filter(|r| !r.is_empty()) {
            s.spawn(move || {
                for mut j in run {
                    // inside the buffer: checked when the job was made
                    from.copy_into(j.start, &mut j.dest);
                }
            });
        }
    });
}

/// `bytes` of `buffer[offsets[i]:offsets[i] + sizes[i]]` each (`None` where `sizes[i] < 0`); see
/// `gdsstore/_core.pyi`.
#[pyfunction]
#[pyo3(signature = (buffer, offsets, sizes, *, threads = 8))]
pub fn split_bytes(
    py: Python<'_>,
    buffer: &Bound<'_, PyAny>,
    offsets: Vec<i64>,
    sizes: Vec<i64>,
    threads: usize,
) -> PyResult<Vec<PyObject>> {
    if offsets.len() != sizes.len() {
        return Err(CallError::Args(
            "split_bytes(): `offsets` and `sizes` must have one entry per item".into(),
        )
        .into());
    }
    let held = Held::readable("split_bytes()", "buffer", buffer)?;
    let len = held.len();
    let mut out: Vec<PyObject> = Vec::with_capacity(sizes.len());
    let mut jobs: Vec<Job> = Vec::with_capacity(sizes.len());
    for (&o, &n) in offsets.iter().zip(&sizes) {
        if n < 0 {
            out.push(py.None());
            continue;
        }
        let (o, n) = (o as usize, n as usize);
        if o.checked_add(n).is_none_or(|e| e > len) {
            return Err(CallError::Args(format!(
                "split_bytes(): item {o}+{n} outside the buffer of {len} bytes"
            ))
            .into());
        }
        let (obj, dest) = new_bytes(py, n)?;
        out.push(obj);
        jobs.push(Job { start: o, dest });
    }
    let from = held.source();
    // `held` (and so the memory it exports) stays alive until the copies are done.
    py.allow_threads(|| copy_all(from, jobs, threads));
    drop(held);
    Ok(out)
}
