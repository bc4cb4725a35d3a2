//! gdsstore's native I/O core, `gdsstore._core`: remote waves of GETs and batches of uploads over the
//! `object_store` crate, and local batch reads, each one call with the GIL released, every item landed in
//! its slot of one caller buffer. This file only registers; each Python function lives with what it does.
//!
//! Modules, each using only those listed before it: `error` (the one error type), `slots` (the caller's
//! buffers: the only `unsafe` beside `stop`'s signal hook), `runtime`, `stop` (Ctrl-C), `ramp`, `store`,
//! `limits`, then the operations `wave`, `put`, `meta`, `local`, `split`, `selection`, `decompress`.
#![deny(unsafe_code)]

mod decompress;
mod error;
mod limits;
mod local;
mod meta;
mod put;
mod ramp;
mod runtime;
mod selection;
mod slots;
mod split;
mod stop;
mod store;
mod wave;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// mimalloc for the core's own allocations: each request's headers, buffers and futures churn malloc.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The crate versions this core was built with.
#[pyfunction]
fn versions(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
    PyTuple::new(
        py,
        [
            ("gdsstore._core", env!("CARGO_PKG_VERSION")),
            ("object_store", "0.12"),
        ],
    )
}

#[pymodule]
#[pyo3(name = "_core")]
fn core_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<store::Store>()?;
    m.add_function(wrap_pyfunction!(wave::read_table, m)?)?;
    m.add_function(wrap_pyfunction!(put::write_objects, m)?)?;
    m.add_function(wrap_pyfunction!(meta::head_object, m)?)?;
    m.add_function(wrap_pyfunction!(meta::list_objects, m)?)?;
    m.add_function(wrap_pyfunction!(meta::delete_objects, m)?)?;
    m.add_function(wrap_pyfunction!(local::read_files, m)?)?;
    m.add_function(wrap_pyfunction!(local::stat_files, m)?)?;
    m.add_function(wrap_pyfunction!(split::split_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(decompress::zstd_decompress, m)?)?;
    m.add_function(wrap_pyfunction!(selection::slice_table, m)?)?;
    m.add_function(wrap_pyfunction!(versions, m)?)?;
    Ok(())
}
