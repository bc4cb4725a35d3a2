//! One batch of uploads: many objects on one store, each a slice of one caller buffer, at most
//! `concurrency` requests in flight. An object above `threshold` bytes is a multipart upload in parts of
//! `part` bytes; a multipart upload that fails is aborted, and since S3 shows an object only once its
//! upload completes, no part of it ever becomes visible. Nothing is retried here (as in `wave`): Python's
//! retry policy decides from each item's error kind.

use object_store::path::Path;
use object_store::{MultipartUpload, ObjectStore, PutMode, PutOptions, PutPayload, PutResult};
use pyo3::prelude::*;
use std::time::Duration;
use tokio::task::JoinSet;

use crate::error::{CallError, Failure, FailureRow, Kind};
use crate::limits::{collect, timed, Limits};
use crate::slots::{Held, Source};
use crate::stop::Stop;
use crate::store::{Built, Store};

/// One object: `path` gets the caller's bytes `[start, start + len)`.
pub struct Put {
    pub path: Path,
    pub start: usize,
    pub len: usize,
}

/// How every object of a call is written.
#[derive(Clone, Copy)]
pub struct Plan {
    /// `If-None-Match: *`: an existing object fails its item with kind "exists".
    pub create: bool,
    pub threshold: usize,
    pub part: usize,
    pub concurrency: usize,
    pub timeout: Duration,
}

/// What one upload did: the object's ETag and version, or an error `(kind, status, message)`.
#[derive(Default)]
pub struct Done {
    pub etag: Option<String>,
    pub version: Option<String>,
    pub error: Option<Failure>,
}

/// A request's deadline: `timeout` to answer, plus a second per MiB of body to send it.
fn deadline(timeout: Duration, bytes: usize) -> Duration {
    timeout + Duration::from_secs((bytes >> 20) as u64)
}

/// The caller's bytes `[start, start + len)` as an owned body (see `Source::copy`).
fn body(from: Source, start: usize, len: usize) -> Result<PutPayload, Failure> {
    from.copy(start, len).map(PutPayload::from).ok_or_else(|| {
        Failure::new(
            Kind::Invalid,
            format!("bytes {start}+{len} outside the caller's buffer"),
        )
    })
}

/// Aborts tried per failed multipart upload: the server keeps (and bills) its parts until one succeeds.
const ABORT_ATTEMPTS: u32 = 4;
/// The time an abort has once the call was stopped (Ctrl-C): the caller is waiting for the interrupt.
const ABORT_WHEN_STOPPED: Duration = Duration::from_secs(1);

/// One call's uploads: the store, the limits every request passes, the caller's bytes and how each
/// object is written. Each item's upload is a method taking only the item.
#[derive(Clone, Copy)]
struct Uploads<'a> {
    store: &'a dyn ObjectStore,
    limits: &'a Limits,
    from: Source,
    plan: Plan,
}

impl Uploads<'_> {
    /// Upload one item: in one request, or in parts above the threshold.
    async fn one(self, it: &Put) -> Result<PutResult, Failure> {
        if it.len <= self.plan.threshold {
            self.single(it).await
        } else if self.plan.create {
            // object_store completes multipart uploads unconditionally: never a silent overwrite.
            Err(Failure::new(
                Kind::Unsupported,
                "a create-only multipart upload (object_store completes it without If-None-Match)",
            ))
        } else {
            self.multipart(it).await
        }
    }

    async fn single(self, it: &Put) -> Result<PutResult, Failure> {
        let mode = if self.plan.create {
            PutMode::Create
        } else {
            PutMode::Overwrite
        };
        let opts = PutOptions {
            mode,
            ..Default::default()
        };
        let payload = body(self.from, it.start, it.len)?;
        let sent = self.store.put_opts(&it.path, payload, opts);
        // A stop drops the request before its body is all sent: the server keeps the old object.
        let limit = deadline(self.plan.timeout, it.len);
        self.limits.request(limit, sent).await
    }

    async fn multipart(self, it: &Put) -> Result<PutResult, Failure> {
        let (limits, timeout) = (self.limits, self.plan.timeout);
        let started = self.store.put_multipart(&it.path);
        let mut upload = limits.request(timeout, started).await?;
        let res = match self.parts(upload.as_mut(), it).await {
            // A stop before the completion answers aborts the upload: never published after Ctrl-C.
            Ok(()) => limits.request(timeout, upload.complete()).await,
            Err(f) => Err(f),
        };
        if res.is_err() {
            self.abort(upload.as_mut()).await;
        }
        res
    }

    /// Send every part, the limits bounding those in flight; the first failure (or a stop) stops the others.
    async fn parts(self, upload: &mut dyn MultipartUpload, it: &Put) -> Result<(), Failure> {
        let (limits, plan) = (self.limits, self.plan);
        let mut tasks = JoinSet::new();
        let mut at = 0;
        let mut failed = None;
        while at < it.len && failed.is_none() {
            let n = plan.part.min(it.len - at);
            let payload = match body(self.from, it.start + at, n) {
                Ok(p) => p,
                Err(f) => {
                    failed = Some(f);
                    break;
                }
            };
            let permits = match limits.enter().await {
                Ok(p) => p,
                Err(f) => {
                    failed = Some(f);
                    break;
                }
            };
            let sent = upload.put_part(payload);
            let limit = deadline(plan.timeout, n);
            tasks.spawn(async move {
                let r = timed(limit, sent).await;
                permits.settle(&r);
                r
            });
            at += n;
            while let Some(joined) = tasks.try_join_next() {
                failed = failed.or(joined_error(joined));
            }
        }
        while failed.is_none() {
            let joined = match limits
                .unless_stopped(async { Ok(tasks.join_next().await) })
                .await
            {
                Ok(Some(joined)) => joined,
                Ok(None) => break,
                Err(f) => {
                    failed = Some(f);
                    break;
                }
            };
            failed = joined_error(joined);
        }
        // Parts still in flight are cancelled before the upload is aborted.
        tasks.shutdown().await;
        failed.map_or(Ok(()), Err)
    }

    /// Drop the parts sent. Tried again on a transient failure (the abort often races the cancelled
    /// parts' requests, and a busy server may miss the deadline); an upload the server no longer knows
    /// is gone already. Best effort after that: a lifecycle rule cleans what a lost abort leaves. A
    /// stopped call tries once, briefly, past the limits (their places may all be held by requests being
    /// cancelled).
    async fn abort(self, upload: &mut dyn MultipartUpload) {
        let (limits, timeout) = (self.limits, self.plan.timeout);
        if limits.stopped() {
            let _ = timed(timeout.min(ABORT_WHEN_STOPPED), upload.abort()).await;
            return;
        }
        for attempt in 0..ABORT_ATTEMPTS {
            let over = match limits.enter().await {
                Err(_) => true,
                // The permits go before the pause below.
                Ok(permits) => {
                    let r = timed(timeout, upload.abort()).await;
                    permits.settle(&r);
                    match r {
                        Ok(()) => true,
                        Err(f) => matches!(f.kind, Kind::NotFound | Kind::Permission),
                    }
                }
            };
            if over {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
        }
        if limits.stopped() {
            let _ = timed(timeout.min(ABORT_WHEN_STOPPED), upload.abort()).await;
        }
    }
}

fn joined_error(joined: Result<Result<(), Failure>, tokio::task::JoinError>) -> Option<Failure> {
    match joined {
        Ok(Ok(())) => None,
        Ok(Err(f)) => Some(f),
        Err(_) => Some(Failure::panic("a part's task failed inside the core")),
    }
}

/// Run the uploads; one result per item, in order.
pub async fn run(built: Built, items: Vec<Put>, from: Source, plan: Plan, stop: Stop) -> Vec<Done> {
    let n = items.len();
    let limits = Limits::new(plan.concurrency, &built, stop);
    let mut tasks = JoinSet::new();
    for (i, it) in items.into_iter().enumerate() {
        let store = built.store.clone();
        let limits = limits.clone();
        tasks.spawn(async move {
            let uploads = Uploads {
                store: store.as_ref(),
                limits: &limits,
                from,
                plan,
            };
            (i, uploads.one(&it).await)
        });
    }
    let lost = || Err(Failure::panic("the upload's task failed inside the core"));
    let results = collect(tasks, n, lost).await;
    let done = |r: Result<PutResult, Failure>| match r {
        Ok(put) => Done {
            etag: put.e_tag,
            version: put.version,
            error: None,
        },
        Err(f) => Done {
            error: Some(f),
            ..Done::default()
        },
    };
    results.into_iter().map(done).collect()
}

/// One item's result as Python receives it: `(ETag, version id, error)`.
type PutRow = (Option<String>, Option<String>, Option<FailureRow>);

fn plan_of(mode: &str, part_size: usize, timeout: f64) -> Result<Plan, CallError> {
    const WHO: &str = "write_objects()";
    let create = match mode {
        "overwrite" => false,
        "create" => true,
        m => {
            return Err(CallError::Args(format!(
                "{WHO}: `mode` must be 'overwrite' or 'create', got {m:?}"
            )))
        }
    };
    if part_size == 0 || !(timeout > 0.0 && timeout.is_finite()) {
        return Err(CallError::Args(format!(
            "{WHO}: `part_size` must be > 0 and `timeout` > 0, got {part_size} and {timeout}"
        )));
    }
    Ok(Plan {
        create,
        threshold: 0,
        part: part_size,
        concurrency: 0,
        timeout: Duration::from_secs_f64(timeout),
    })
}

/// Each item's span checked inside the buffer of `len` bytes.
fn check_spans(starts: &[usize], lengths: &[usize], n: usize, len: usize) -> Result<(), CallError> {
    const WHO: &str = "write_objects()";
    if starts.len() != n || lengths.len() != n {
        return Err(CallError::Args(format!(
            "{WHO}: {n} paths but {} starts and {} lengths",
            starts.len(),
            lengths.len()
        )));
    }
    match (0..n).find(|&i| starts[i].checked_add(lengths[i]).is_none_or(|e| e > len)) {
        Some(i) => Err(CallError::Args(format!(
            "{WHO}: item {i}: bytes {}+{} outside the buffer of {len} bytes",
            starts[i], lengths[i]
        ))),
        None => Ok(()),
    }
}

/// Upload `buffer[starts[i]:starts[i] + lengths[i]]` as each path; see `gdsstore/_core.pyi`.
#[pyfunction]
#[pyo3(signature = (store, paths, buffer, starts, lengths, *, mode, threshold, part_size, concurrency = 256, timeout = 30.0))]
#[allow(clippy::too_many_arguments)]
pub fn write_objects<'py>(
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
    let n = paths.len();
    let plan = Plan {
        threshold,
        concurrency,
        ..plan_of(mode, part_size, timeout)?
    };
    let held = Held::readable("write_objects()", "buffer", buffer)?;
    check_spans(&starts, &lengths, n, held.len())?;
    let mut outs: Vec<PutRow> = vec![(None, None, None); n];
    let mut items = Vec::with_capacity(n);
    let mut index = Vec::with_capacity(n);
    for (i, p) in paths.into_iter().enumerate() {
        match Path::parse(&p) {
            Ok(path) => {
                items.push(Put {
                    path,
                    start: starts[i],
                    len: lengths[i],
                });
                index.push(i);
            }
            Err(e) => outs[i].2 = Some(Failure::new(Kind::Unsupported, e.to_string()).row()),
        }
    }
    let from = held.source();
    let built = store.get()?;
    let rt = crate::runtime::get()?;
    // `held` stays alive (and the memory exported) until every upload is over, interrupted or not.
    let done =
        crate::stop::run(py, &rt, |stop| run(built, items, from, plan, stop)).map_err(|_| {
            CallError::Internal("gdsstore._core: the uploads failed inside the core".into())
        })??;
    for (i, d) in index.into_iter().zip(done) {
        outs[i] = (d.etag, d.version, d.error.map(Failure::row));
    }
    drop(held);
    Ok(outs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built() -> Built {
        Built::in_memory()
    }

    /// Puts of `(path, start, len)`.
    fn puts(specs: &[(&str, usize, usize)]) -> Vec<Put> {
        specs
            .iter()
            .map(|&(path, start, len)| Put {
                path: Path::from(path),
                start,
                len,
            })
            .collect()
    }

    /// A stop signal nobody sets.
    fn go() -> Stop {
        Stop::new().1
    }

    fn plan(create: bool) -> Plan {
        Plan {
            create,
            threshold: 10,
            part: 4,
            concurrency: 2,
            timeout: Duration::from_secs(5),
        }
    }

    fn rt() -> tokio::runtime::Runtime {
        crate::runtime::two_workers()
    }

    /// Run the uploads of `items`, slices of `data`, on `rt` to the end.
    fn upload(
        rt: &tokio::runtime::Runtime,
        b: &Built,
        items: Vec<Put>,
        data: &[u8],
        plan: Plan,
        stop: Stop,
    ) -> Vec<Done> {
        rt.block_on(run(b.clone(), items, Source::over(data), plan, stop))
    }

    #[test]
    fn single_and_multipart_land_their_slices() {
        let data: Vec<u8> = (0..64u8).collect();
        let b = built();
        let items = puts(&[("a", 3, 5), ("b", 10, 23), ("c", 0, 0)]);
        let rt = rt();
        let outs = upload(&rt, &b, items, &data, plan(false), go());
        assert!(outs.iter().all(|o| o.error.is_none()));
        let get = |p: &str| {
            rt.block_on(async {
                b.store
                    .get(&Path::from(p))
                    .await
                    .unwrap()
                    .bytes()
                    .await
                    .unwrap()
            })
        };
        assert_eq!(get("a").as_ref(), &data[3..8]);
        assert_eq!(get("b").as_ref(), &data[10..33]);
        assert!(get("c").is_empty());
    }

    #[test]
    fn create_refuses_an_existing_object() {
        let data = [7u8; 8];
        let b = built();
        let rt = rt();
        let one = || puts(&[("x", 0, 8)]);
        let first = upload(&rt, &b, one(), &data, plan(true), go());
        assert!(first[0].error.is_none() && first[0].etag.is_some());
        let second = upload(&rt, &b, one(), &data, plan(true), go());
        assert_eq!(
            second[0].error.as_ref().map(|e| e.kind.name()),
            Some("exists")
        );
        let big = puts(&[("big", 0, 20)]);
        let refused = upload(&rt, &b, big, &[1u8; 20], plan(true), go());
        assert_eq!(
            refused[0].error.as_ref().map(|e| e.kind.name()),
            Some("unsupported")
        );
    }

    #[test]
    fn a_stopped_call_publishes_nothing() {
        let data = [3u8; 40];
        let b = built();
        let (switch, stop) = Stop::new();
        switch.send(true).unwrap();
        let items = puts(&[("small", 0, 8), ("parts", 0, 40)]);
        let rt = rt();
        let outs = upload(&rt, &b, items, &data, plan(false), stop);
        for o in &outs {
            assert_eq!(o.error.as_ref().map(|e| e.kind.name()), Some("interrupted"));
        }
        for p in ["small", "parts"] {
            assert!(
                rt.block_on(b.store.head(&Path::from(p))).is_err(),
                "{p} published"
            );
        }
        drop(switch);
    }
}
