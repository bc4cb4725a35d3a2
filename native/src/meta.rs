//! A store's requests about objects rather than their bytes: HEAD of one object, LIST of a prefix (every
//! page, with or without a delimiter) and DELETE of many objects, each one call with the GIL released.
//! Every request passes the same limits as a wave's (`limits`: the store's connections and ramp) and
//! stops on Ctrl-C. Nothing is retried here (as in `wave`): Python's retry policy decides from the error's
//! kind, and a listing that failed part way answers where to take it up again.

use futures::StreamExt;
use object_store::list::PaginatedListOptions;
use object_store::path::Path;
use object_store::{ObjectMeta, ObjectStore};
use pyo3::prelude::*;
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

use crate::error::{CallError, Failure, FailureRow, Kind};
use crate::limits::{collect, Limits};
use crate::stop::Stop;
use crate::store::{Built, Store};

/// One object as Python receives it: `(key, size, last-modified in ns since the epoch, ETag, version id)`.
type MetaRow = (String, u64, i64, Option<String>, Option<String>);

/// S3's DeleteObjects takes at most this many keys.
const DELETE_BATCH: usize = 1000;

fn row(meta: ObjectMeta) -> MetaRow {
    (
        meta.location.to_string(),
        meta.size,
        meta.last_modified.timestamp_nanos_opt().unwrap_or(0),
        meta.e_tag,
        meta.version,
    )
}

fn timeout_of(call: &str, timeout: f64) -> Result<Duration, CallError> {
    if timeout > 0.0 && timeout.is_finite() {
        Ok(Duration::from_secs_f64(timeout))
    } else {
        Err(CallError::Args(format!(
            "{call}: `timeout` must be > 0, got {timeout}"
        )))
    }
}

fn path_of(p: &str) -> Result<Path, Failure> {
    Path::parse(p).map_err(|e| Failure::new(Kind::Invalid, e.to_string()))
}

/// Run `work` on the runtime until it is over (Ctrl-C raises once it is); `what` names the call.
fn run_call<T, F>(py: Python<'_>, what: &str, work: impl FnOnce(Stop) -> F) -> PyResult<T>
where
    F: std::future::Future<Output = T> + Send,
    T: Send,
{
    let rt = crate::runtime::get()?;
    crate::stop::run(py, &rt, work).map_err(|_| {
        PyErr::from(CallError::Internal(format!(
            "gdsstore._core: {what} failed inside the core"
        )))
    })?
}

/// HEAD of one object; see `gdsstore/_core.pyi`.
#[pyfunction]
#[pyo3(signature = (store, path, *, timeout = 30.0))]
pub fn head_object(
    py: Python<'_>,
    store: &Store,
    path: String,
    timeout: f64,
) -> PyResult<(Option<MetaRow>, Option<FailureRow>)> {
    let limit = timeout_of("head_object()", timeout)?;
    let built = store.get()?;
    let done = run_call(py, "head_object()", |stop| async move {
        let path = path_of(&path)?;
        let limits = Limits::new(1, &built, stop);
        limits.request(limit, built.store.head(&path)).await
    })?;
    Ok(match done {
        Ok(meta) => (Some(row(meta)), None),
        Err(f) => (None, Some(f.row())),
    })
}

/// What a listing found, and where to take it up again after a failure.
#[derive(Default)]
struct Listing {
    objects: Vec<MetaRow>,
    prefixes: Vec<String>,
    /// The page token of the page that failed (None with an error: the first page).
    resume: Option<String>,
    error: Option<Failure>,
}

async fn list_pages(
    built: Built,
    prefix: String,
    delimiter: Option<String>,
    mut token: Option<String>,
    timeout: Duration,
    stop: Stop,
) -> Listing {
    let mut out = Listing::default();
    let Some(lister) = built.lister.clone() else {
        out.error = Some(Failure::new(
            Kind::Unsupported,
            "this store has no listing by prefix",
        ));
        return out;
    };
    let limits = Limits::new(1, &built, stop);
    let prefix = (!prefix.is_empty()).then_some(prefix);
    loop {
        let opts = PaginatedListOptions {
            delimiter: delimiter.clone().map(Cow::Owned),
            page_token: token.clone(),
            ..Default::default()
        };
        let page = limits.request(timeout, lister.list_paginated(prefix.as_deref(), opts));
        match page.await {
            Err(f) => {
                out.resume = token;
                out.error = Some(f);
                return out;
            }
            Ok(page) => {
                out.objects.extend(page.result.objects.into_iter().map(row));
                let sep = delimiter.as_deref().unwrap_or("/");
                // object_store's paths drop the delimiter a common prefix ends with.
                out.prefixes.extend(
                    page.result
                        .common_prefixes
                        .into_iter()
                        .map(|p| format!("{p}{sep}")),
                );
                token = page.page_token;
                if token.is_none() {
                    return out;
                }
            }
        }
    }
}

/// LIST every page of a prefix; see `gdsstore/_core.pyi`.
#[pyfunction]
#[pyo3(signature = (store, prefix, *, delimiter = None, resume = None, timeout = 30.0))]
#[allow(clippy::type_complexity)]
pub fn list_objects(
    py: Python<'_>,
    store: &Store,
    prefix: String,
    delimiter: Option<String>,
    resume: Option<String>,
    timeout: f64,
) -> PyResult<(
    Vec<MetaRow>,
    Vec<String>,
    Option<String>,
    Option<FailureRow>,
)> {
    let limit = timeout_of("list_objects()", timeout)?;
    let built = store.get()?;
    let l = run_call(py, "list_objects()", |stop| {
        list_pages(built, prefix, delimiter, resume, limit, stop)
    })?;
    Ok((l.objects, l.prefixes, l.resume, l.error.map(Failure::row)))
}

/// Delete `paths` (one DELETE, or DeleteObjects of up to `DELETE_BATCH` keys): one result per path.
async fn delete_batch(
    store: Arc<dyn ObjectStore>,
    limits: Limits,
    paths: Vec<Path>,
    timeout: Duration,
) -> Vec<Option<Failure>> {
    let n = paths.len();
    if n == 1 {
        let r = limits.request(timeout, store.delete(&paths[0])).await;
        return vec![r.err()];
    }
    let sent = async {
        let each = store.delete_stream(futures::stream::iter(paths.into_iter().map(Ok)).boxed());
        Ok(each.collect::<Vec<_>>().await)
    };
    match limits.request(timeout, sent).await {
        // One answer per key, in the order sent.
        Ok(each) if each.len() == n => each
            .into_iter()
            .map(|r| r.err().map(|e| Failure::from(&e)))
            .collect(),
        // The request failed as a whole: every key of it did.
        Ok(each) => {
            let f = each.into_iter().find_map(|r| r.err()).map_or_else(
                || Failure::new(Kind::Invalid, "DeleteObjects answered fewer keys than sent"),
                |e| Failure::from(&e),
            );
            vec![Some(f); n]
        }
        Err(f) => vec![Some(f); n],
    }
}

async fn delete_all(
    built: Built,
    paths: Vec<Path>,
    concurrency: usize,
    timeout: Duration,
    stop: Stop,
) -> Vec<Option<Failure>> {
    let limits = Limits::new(concurrency, &built, stop);
    let mut tasks = JoinSet::new();
    let mut sizes = Vec::new();
    let mut rest = paths.into_iter().peekable();
    while rest.peek().is_some() {
        let batch: Vec<Path> = rest.by_ref().take(DELETE_BATCH).collect();
        let batch_len = batch.len();
        let work = delete_batch(built.store.clone(), limits.clone(), batch, timeout);
        let i = sizes.len();
        sizes.push(batch_len);
        tasks.spawn(async move { (i, work.await) });
    }
    let batches = collect(tasks, sizes.len(), Vec::new).await;
    let mut out = Vec::new();
    for (b, n) in batches.into_iter().zip(sizes) {
        let lost = || Some(Failure::panic("a delete's task failed inside the core"));
        if b.len() == n {
            out.extend(b);
        } else {
            out.extend((0..n).map(|_| lost()));
        }
    }
    out
}

/// DELETE every path; see `gdsstore/_core.pyi`.
#[pyfunction]
#[pyo3(signature = (store, paths, *, concurrency = 16, timeout = 30.0))]
pub fn delete_objects(
    py: Python<'_>,
    store: &Store,
    paths: Vec<String>,
    concurrency: usize,
    timeout: f64,
) -> PyResult<Vec<Option<FailureRow>>> {
    let limit = timeout_of("delete_objects()", timeout)?;
    let mut out: Vec<Option<FailureRow>> = vec![None; paths.len()];
    let mut parsed = Vec::with_capacity(paths.len());
    let mut index = Vec::with_capacity(paths.len());
    for (i, p) in paths.iter().enumerate() {
        match path_of(p) {
            Ok(path) => {
                parsed.push(path);
                index.push(i);
            }
            Err(f) => out[i] = Some(f.row()),
        }
    }
    let built = store.get()?;
    let done = run_call(py, "delete_objects()", |stop| {
        delete_all(built, parsed, concurrency, limit, stop)
    })?;
    for (i, f) in index.into_iter().zip(done) {
        out[i] = f.map(Failure::row);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::PutPayload;

    fn built() -> Built {
        Built::in_memory()
    }

    fn rt() -> tokio::runtime::Runtime {
        crate::runtime::two_workers()
    }

    const LIMIT: Duration = Duration::from_secs(5);

    #[test]
    fn deletes_every_path_in_batches_one_result_each() {
        let b = built();
        let rt = rt();
        let paths: Vec<Path> = (0..DELETE_BATCH + 1)
            .map(|i| Path::from(format!("k{i}")))
            .collect();
        rt.block_on(async {
            for p in &paths[..3] {
                b.store.put(p, PutPayload::from_static(b"x")).await.unwrap();
            }
        });
        // missing keys are no error, as S3's DELETE
        let outs = rt.block_on(delete_all(b.clone(), paths, 2, LIMIT, Stop::new().1));
        assert_eq!(outs.len(), DELETE_BATCH + 1);
        assert!(outs.iter().all(Option::is_none));
        assert!(rt.block_on(b.store.head(&Path::from("k0"))).is_err());
    }

    #[test]
    fn a_stopped_call_deletes_nothing() {
        let b = built();
        let rt = rt();
        let p = Path::from("kept");
        rt.block_on(b.store.put(&p, PutPayload::from_static(b"x")))
            .unwrap();
        let (switch, stop) = Stop::new();
        switch.send(true).unwrap();
        let outs = rt.block_on(delete_all(b.clone(), vec![p.clone()], 2, LIMIT, stop));
        assert_eq!(outs[0].as_ref().map(|f| f.kind.name()), Some("interrupted"));
        assert!(rt.block_on(b.store.head(&p)).is_ok());
    }

    #[test]
    fn a_store_without_listing_says_so() {
        let rt = rt();
        let l = rt.block_on(list_pages(
            built(),
            "a/".into(),
            None,
            None,
            LIMIT,
            Stop::new().1,
        ));
        assert_eq!(l.error.map(|f| f.kind.name()), Some("unsupported"));
    }
}
