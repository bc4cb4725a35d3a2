//! gdsstore's native I/O core: a whole remote wave of GETs per call, the GIL released, every body written
//! into its slot of one caller buffer, over the `object_store` crate on one tokio runtime per process.

mod gates;
mod local;
mod put;
mod ramp;
mod runtime;
mod split;
mod stop;
mod store;
mod wave;

/// mimalloc for the core's own allocations (each request's headers, buffers and futures): glibc's malloc and
/// free were 14 % of a wave's CPU time in a profile of 4 KiB GETs.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use object_store::path::Path;
use object_store::GetRange;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::Duration;

use store::Store;
use wave::{Item, Outcome, Target};

type Row = (
    i64,
    i64,
    Option<String>,
    i64,
    Option<String>,
    Option<(&'static str, u16, String)>,
);

fn range_of(start: i64, end: i64) -> Result<Option<GetRange>, String> {
    match (start, end) {
        (0, e) if e < 0 => Ok(None),
        (s, _) if s < 0 => Ok(Some(GetRange::Suffix(s.unsigned_abs()))),
        (s, e) if e < 0 => Ok(Some(GetRange::Offset(s as u64))),
        (s, e) if e > s => Ok(Some(GetRange::Bounded(s as u64..e as u64))),
        (s, e) => Err(format!("empty range {s}..{e}")),
    }
}

/// Slots must lie inside the buffer and not overlap: tasks write them concurrently.
fn check_slots(who: &str, slots: &[usize], caps: &[usize], len: usize) -> PyResult<()> {
    let mut spans: Vec<(usize, usize)> = slots.iter().copied().zip(caps.iter().copied()).collect();
    spans.sort_unstable();
    let mut end = 0usize;
    for (s, c) in spans {
        let e = s.checked_add(c).filter(|e| *e <= len).ok_or_else(|| {
            PyValueError::new_err(format!(
                "{who}: slot {s}+{c} outside the buffer of {len} bytes"
            ))
        })?;
        if c > 0 && s < end {
            return Err(PyValueError::new_err(format!(
                "{who}: slot at {s} overlaps the one before"
            )));
        }
        end = end.max(e);
    }
    Ok(())
}

fn row(o: Outcome) -> Row {
    (o.got, o.total, o.etag, o.mtime_ns, o.version, o.error)
}

/// Items whose path object_store cannot take are answered "unsupported" without a request.
fn plan(
    paths: Vec<String>,
    starts: &[i64],
    ends: &[i64],
    expect: &[i64],
    slots: &[usize],
    caps: &[usize],
    if_match: Option<Vec<Option<String>>>,
) -> (Vec<Item>, Vec<usize>, Vec<Outcome>) {
    let mut if_match = if_match.unwrap_or_default().into_iter();
    let mut items = Vec::with_capacity(paths.len());
    let mut index = Vec::with_capacity(paths.len());
    let mut outs: Vec<Outcome> = (0..paths.len()).map(|_| Outcome::default()).collect();
    for (i, p) in paths.into_iter().enumerate() {
        let tag = if_match.next().flatten();
        let parsed = Path::parse(&p).map_err(|e| e.to_string());
        match (parsed, range_of(starts[i], ends[i])) {
            (Ok(path), Ok(range)) => {
                items.push(Item {
                    path,
                    range,
                    expect: u64::try_from(expect[i]).ok(),
                    slot: slots[i],
                    cap: caps[i],
                    if_match: tag,
                });
                index.push(i);
            }
            (Err(e), _) | (_, Err(e)) => outs[i].error = Some(("unsupported", 0, e)),
        }
    }
    (items, index, outs)
}

/// Run one wave of GETs on `store`; see `gdsstore_core.pyi`.
#[pyfunction]
#[pyo3(signature = (store, paths, starts, ends, expect, slots, caps, buffer, *, concurrency = 256, timeout = 30.0, if_match = None))]
#[allow(clippy::too_many_arguments)]
fn read_wave<'py>(
    py: Python<'py>,
    store: &Store,
    paths: Vec<String>,
    starts: Vec<i64>,
    ends: Vec<i64>,
    expect: Vec<i64>,
    slots: Vec<usize>,
    caps: Vec<usize>,
    buffer: &Bound<'py, PyAny>,
    concurrency: usize,
    timeout: f64,
    if_match: Option<Vec<Option<String>>>,
) -> PyResult<Vec<Row>> {
    let n = paths.len();
    if if_match.as_ref().is_some_and(|m| m.len() != n) {
        return Err(PyValueError::new_err(
            "read_wave(): `if_match` must have one entry per path",
        ));
    }
    if [
        starts.len(),
        ends.len(),
        expect.len(),
        slots.len(),
        caps.len(),
    ]
    .iter()
    .any(|l| *l != n)
    {
        return Err(PyValueError::new_err(
            "read_wave(): all item lists must have one entry per path",
        ));
    }
    let buf = writable("read_wave()", "buffer", buffer)?;
    check_slots("read_wave()", &slots, &caps, buf.len_bytes())?;
    if !(timeout > 0.0 && timeout.is_finite()) {
        return Err(PyValueError::new_err(format!(
            "read_wave(): `timeout` must be > 0, got {timeout}"
        )));
    }
    let to = Target(buf.buf_ptr() as usize);
    let (items, index, mut outs) = plan(paths, &starts, &ends, &expect, &slots, &caps, if_match);
    let os = store.get().map_err(PyRuntimeError::new_err)?;
    let rt = runtime::get()
        .map_err(|e| PyRuntimeError::new_err(format!("gdsstore_core: no runtime: {e}")))?;
    let read_timeout = Duration::from_secs_f64(timeout);
    // `buf` stays alive (and the memory exported) until the wave is over, interrupted or not.
    let done = stop::run(py, &rt, |stop| {
        wave::run(os, items, to, concurrency, read_timeout, stop)
    })
    .map_err(|_| PyRuntimeError::new_err("gdsstore_core: the wave failed inside the core"))??;
    for (i, o) in index.into_iter().zip(done) {
        outs[i] = o;
    }
    drop(buf);
    Ok(outs.into_iter().map(row).collect())
}

/// A C-contiguous byte buffer (the source of writes and copies).
pub(crate) fn readable(who: &str, what: &str, obj: &Bound<'_, PyAny>) -> PyResult<PyBuffer<u8>> {
    let buf = PyBuffer::<u8>::get(obj)?;
    if !buf.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "{who}: `{what}` must be a contiguous uint8 buffer"
        )));
    }
    Ok(buf)
}

/// A writable, C-contiguous byte buffer (the destination of reads).
fn writable(who: &str, what: &str, obj: &Bound<'_, PyAny>) -> PyResult<PyBuffer<u8>> {
    let buf = PyBuffer::<u8>::get(obj)?;
    if buf.readonly() || !buf.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "{who}: `{what}` must be a writable, contiguous uint8 buffer"
        )));
    }
    Ok(buf)
}

/// A one-dimensional int64 array's values, each checked `>= 0` where `nonneg`.
fn int64s(
    py: Python<'_>,
    who: &str,
    what: &str,
    obj: &Bound<'_, PyAny>,
    n: usize,
) -> PyResult<Vec<i64>> {
    let vals = PyBuffer::<i64>::get(obj)?.to_vec(py)?;
    if vals.len() != n {
        return Err(PyValueError::new_err(format!(
            "{who}: {n} paths but {} {what}",
            vals.len()
        )));
    }
    Ok(vals)
}

fn nonneg(who: &str, what: &str, vals: &[i64]) -> PyResult<()> {
    match vals.iter().find(|v| **v < 0) {
        Some(v) => Err(PyValueError::new_err(format!("{who}: negative {what} {v}"))),
        None => Ok(()),
    }
}

/// Read local files into slots of one buffer; see `gdsstore_core.pyi`.
#[pyfunction]
#[pyo3(signature = (paths, offsets, sizes, buffer, slots, got, *, threads = 1))]
#[allow(clippy::too_many_arguments)]
fn read_files<'py>(
    py: Python<'py>,
    paths: Vec<PathBuf>,
    offsets: &Bound<'py, PyAny>,
    sizes: &Bound<'py, PyAny>,
    buffer: &Bound<'py, PyAny>,
    slots: &Bound<'py, PyAny>,
    got: &Bound<'py, PyAny>,
    threads: usize,
) -> PyResult<Vec<ItemError>> {
    const WHO: &str = "read_files()";
    let n = paths.len();
    let offsets = int64s(py, WHO, "offsets", offsets, n)?;
    let sizes: Vec<usize> = int64s(py, WHO, "sizes", sizes, n)?
        .into_iter()
        .map(|s| s.max(0) as usize) // sizes <= 0 are skipped
        .collect();
    let slots = int64s(py, WHO, "slots", slots, n)?;
    nonneg(WHO, "offset", &offsets)?;
    nonneg(WHO, "slot", &slots)?;
    let slots: Vec<usize> = slots.into_iter().map(|s| s as usize).collect();
    let out = counts_out(WHO, got, n)?;
    let buf = writable(WHO, "buffer", buffer)?;
    check_slots(WHO, &slots, &sizes, buf.len_bytes())?;
    let reads: Vec<local::Read> = paths
        .into_iter()
        .zip(offsets)
        .zip(sizes.into_iter().zip(slots))
        .map(|((path, offset), (size, slot))| local::Read {
            path,
            offset: offset as u64,
            size,
            slot,
        })
        .collect();
    let to = Target(buf.buf_ptr() as usize);
    let rt = runtime::get()
        .map_err(|e| PyRuntimeError::new_err(format!("gdsstore_core: no runtime: {e}")))?;
    // `buf` stays alive (and the memory exported) until every read is over.
    let done = py
        .allow_threads(|| catch_unwind(AssertUnwindSafe(|| local::run(&rt, reads, to, threads))))
        .map_err(|_| PyRuntimeError::new_err("gdsstore_core: the batch failed inside the core"))?;
    drop(buf);
    report(py, done, &out)
}

type ItemError = (usize, &'static str, i32, String);

/// An int64 array of `n` items that the core writes its counts into.
fn counts_out(who: &str, obj: &Bound<'_, PyAny>, n: usize) -> PyResult<PyBuffer<i64>> {
    let out = PyBuffer::<i64>::get(obj)?;
    if out.readonly() || out.item_count() != n {
        return Err(PyValueError::new_err(format!(
            "{who}: `got` must be a writable int64 array of {n} items"
        )));
    }
    Ok(out)
}

/// Each item's count into `out`; the failed items as `(index, kind, errno, message)`.
fn report(
    py: Python<'_>,
    done: Vec<local::Outcome>,
    out: &PyBuffer<i64>,
) -> PyResult<Vec<ItemError>> {
    let counts: Vec<i64> = done.iter().map(|o| o.got).collect();
    out.copy_from_slice(py, &counts)?;
    Ok(done
        .into_iter()
        .enumerate()
        .filter_map(|(i, o)| o.error.map(|(k, errno, msg)| (i, k, errno, msg)))
        .collect())
}

/// Sizes of local files; see `gdsstore_core.pyi`.
#[pyfunction]
#[pyo3(signature = (paths, got, *, threads = 1))]
fn stat_files(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    got: &Bound<'_, PyAny>,
    threads: usize,
) -> PyResult<Vec<ItemError>> {
    let out = counts_out("stat_files()", got, paths.len())?;
    let rt = runtime::get()
        .map_err(|e| PyRuntimeError::new_err(format!("gdsstore_core: no runtime: {e}")))?;
    let done = py
        .allow_threads(|| catch_unwind(AssertUnwindSafe(|| local::sizes(&rt, paths, threads))))
        .map_err(|_| PyRuntimeError::new_err("gdsstore_core: the batch failed inside the core"))?;
    report(py, done, &out)
}

type PutRow = (
    Option<String>,
    Option<String>,
    Option<(&'static str, u16, String)>,
);

/// Upload `buffer[starts[i]:starts[i] + lengths[i]]` as each path; see `gdsstore_core.pyi`.
#[pyfunction]
#[pyo3(signature = (store, paths, buffer, starts, lengths, *, mode, threshold, part_size, concurrency = 256, timeout = 30.0))]
#[allow(clippy::too_many_arguments)]
fn write_objects<'py>(
    py: Python<'py>,
    store: &Store,
    paths: Vec<String>,
    buffer: &Bound<'py, PyAny>,
    starts: Vec<usize>,
    lengths: Vec<usize>,
    mode: &str,
    threshold: usize,
    part_size: usize,
    concurrency: usize,
    timeout: f64,
) -> PyResult<Vec<PutRow>> {
    const WHO: &str = "write_objects()";
    let n = paths.len();
    if starts.len() != n || lengths.len() != n {
        return Err(PyValueError::new_err(format!(
            "{WHO}: {n} paths but {} starts and {} lengths",
            starts.len(),
            lengths.len()
        )));
    }
    let create = match mode {
        "overwrite" => false,
        "create" => true,
        m => {
            return Err(PyValueError::new_err(format!(
                "{WHO}: `mode` must be 'overwrite' or 'create', got {m:?}"
            )))
        }
    };
    if part_size == 0 || !(timeout > 0.0 && timeout.is_finite()) {
        return Err(PyValueError::new_err(format!(
            "{WHO}: `part_size` must be > 0 and `timeout` > 0, got {part_size} and {timeout}"
        )));
    }
    let buf = readable(WHO, "buffer", buffer)?;
    let len = buf.len_bytes();
    if let Some(i) = (0..n).find(|&i| starts[i].checked_add(lengths[i]).is_none_or(|e| e > len)) {
        return Err(PyValueError::new_err(format!(
            "{WHO}: item {i}: bytes {}+{} outside the buffer of {len} bytes",
            starts[i], lengths[i]
        )));
    }
    let mut outs: Vec<PutRow> = vec![(None, None, None); n];
    let mut items = Vec::with_capacity(n);
    let mut index = Vec::with_capacity(n);
    for (i, p) in paths.into_iter().enumerate() {
        match Path::parse(&p) {
            Ok(path) => {
                items.push(put::Put {
                    path,
                    start: starts[i],
                    len: lengths[i],
                });
                index.push(i);
            }
            Err(e) => outs[i].2 = Some(("unsupported", 0, e.to_string())),
        }
    }
    let plan = put::Plan {
        create,
        threshold,
        part: part_size,
        concurrency,
        timeout: Duration::from_secs_f64(timeout),
    };
    let from = Target(buf.buf_ptr() as usize);
    let os = store.get().map_err(PyRuntimeError::new_err)?;
    let rt = runtime::get()
        .map_err(|e| PyRuntimeError::new_err(format!("gdsstore_core: no runtime: {e}")))?;
    // `buf` stays alive (and the memory exported) until every upload is over, interrupted or not.
    let done =
        stop::run(py, &rt, |stop| put::run(os, items, from, plan, stop)).map_err(|_| {
            PyRuntimeError::new_err("gdsstore_core: the uploads failed inside the core")
        })??;
    for (i, d) in index.into_iter().zip(done) {
        outs[i] = (d.etag, d.version, d.error);
    }
    drop(buf);
    Ok(outs)
}

/// The crate versions this core was built with.
#[pyfunction]
fn versions(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
    PyTuple::new(
        py,
        [
            ("gdsstore_core", env!("CARGO_PKG_VERSION")),
            ("object_store", "0.12"),
        ],
    )
}

/// Items of one buffer as `bytes` objects, copied on `threads` threads; see `gdsstore_core.pyi`.
#[pyfunction]
#[pyo3(signature = (buffer, offsets, sizes, *, threads = 8))]
fn split_bytes(
    py: Python<'_>,
    buffer: &Bound<'_, PyAny>,
    offsets: Vec<i64>,
    sizes: Vec<i64>,
    threads: usize,
) -> PyResult<Vec<PyObject>> {
    split::split(py, buffer, &offsets, &sizes, threads)
}

#[pymodule]
fn gdsstore_core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Store>()?;
    m.add_function(wrap_pyfunction!(read_wave, m)?)?;
    m.add_function(wrap_pyfunction!(write_objects, m)?)?;
    m.add_function(wrap_pyfunction!(read_files, m)?)?;
    m.add_function(wrap_pyfunction!(stat_files, m)?)?;
    m.add_function(wrap_pyfunction!(versions, m)?)?;
    m.add_function(wrap_pyfunction!(split_bytes, m)?)?;
    Ok(())
}
