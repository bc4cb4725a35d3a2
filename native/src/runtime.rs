//! One tokio runtime per process, rebuilt in a forked child (its worker threads did not survive the fork).

use std::sync::{Arc, Mutex};
use tokio::runtime::Runtime;

use crate::error::CallError;

struct Held {
    pid: u32,
    runtime: Arc<Runtime>,
}

static RUNTIME: Mutex<Option<Held>> = Mutex::new(None);

/// Worker threads: the cores, at most 16 (the work is I/O and copies, not compute).
pub fn workers() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2)
        .clamp(1, 16)
}

/// A runtime of two workers of its own: the crate's tests of what runs on a store.
#[cfg(test)]
pub fn two_workers() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The runtime of this process; a new one after `fork()`.
pub fn get() -> Result<Arc<Runtime>, CallError> {
    build().map_err(|e| CallError::Internal(format!("gdsstore._core: no runtime: {e}")))
}

fn build() -> std::io::Result<Arc<Runtime>> {
    let pid = std::process::id();
    let mut held = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(h) = held.as_ref() {
        if h.pid == pid {
            return Ok(h.runtime.clone());
        }
    }
    let runtime = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers())
            .thread_name("gdsstore-core")
            .enable_all()
            .build()?,
    );
    // The parent's runtime is leaked, never dropped: its threads do not exist here, so a drop would wait forever.
    if let Some(old) = held.replace(Held {
        pid,
        runtime: runtime.clone(),
    }) {
        std::mem::forget(old);
    }
    Ok(runtime)
}
