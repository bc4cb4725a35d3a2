//! One batch of uploads: many objects on one store, each a slice of one caller buffer, at most
//! `concurrency` requests in flight. An object above `threshold` bytes is a multipart upload in parts of
//! `part` bytes; a multipart upload that fails is aborted, and since S3 shows an object only once its
//! upload completes, no part of it ever becomes visible. Nothing is retried here (as in `wave`): Python's
//! retry policy decides from each item's error kind.

use bytes::Bytes;
use object_store::path::Path;
use object_store::{MultipartUpload, ObjectStore, PutMode, PutOptions, PutPayload, PutResult};
use std::future::Future;
use std::time::Duration;
use tokio::task::JoinSet;

use crate::gates::{collect, Gates};
use crate::stop::Stop;
use crate::wave::{classify, Failure, Target};

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

async fn timed<T>(
    limit: Duration,
    f: impl Future<Output = object_store::Result<T>>,
) -> Result<T, Failure> {
    match tokio::time::timeout(limit, f).await {
        Err(_) => Err(("timeout", 0, format!("no answer in {limit:?}"))),
        Ok(Err(e)) => Err(classify(&e)),
        Ok(Ok(v)) => Ok(v),
    }
}

/// The caller's bytes `[start, start + len)` as an owned body. Copied, not borrowed: the HTTP client may
/// still hold a body after its request timed out, and the caller's buffer is released when the call returns.
fn body(from: Target, start: usize, len: usize) -> PutPayload {
    // SAFETY: [start, start + len) lies inside the caller's buffer (checked before the call), which stays
    // alive and exported until every task of the call is over.
    let bytes = unsafe { std::slice::from_raw_parts((from.0 + start) as *const u8, len) };
    PutPayload::from(Bytes::copy_from_slice(bytes))
}

async fn single(
    store: &dyn ObjectStore,
    gates: &Gates,
    it: &Put,
    from: Target,
    plan: Plan,
) -> Result<PutResult, Failure> {
    let mode = if plan.create {
        PutMode::Create
    } else {
        PutMode::Overwrite
    };
    let opts = PutOptions {
        mode,
        ..Default::default()
    };
    let permits = gates.enter().await?;
    let payload = body(from, it.start, it.len);
    let sent = timed(
        deadline(plan.timeout, it.len),
        store.put_opts(&it.path, payload, opts),
    );
    // A stop drops the request before its body is all sent: the server keeps the old object.
    let r = gates.unless_stopped(sent).await;
    permits.settle(&r);
    r
}

/// Send every part, `gates` bounding those in flight; the first failure (or a stop) stops the others.
async fn parts(
    upload: &mut dyn MultipartUpload,
    gates: &Gates,
    it: &Put,
    from: Target,
    plan: Plan,
) -> Result<(), Failure> {
    let mut tasks = JoinSet::new();
    let mut at = 0;
    let mut failed = None;
    while at < it.len && failed.is_none() {
        let n = plan.part.min(it.len - at);
        let permits = match gates.enter().await {
            Ok(p) => p,
            Err(f) => {
                failed = Some(f);
                break;
            }
        };
        let sent = upload.put_part(body(from, it.start + at, n));
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
        let joined = match gates
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

fn joined_error(joined: Result<Result<(), Failure>, tokio::task::JoinError>) -> Option<Failure> {
    match joined {
        Ok(Ok(())) => None,
        Ok(Err(f)) => Some(f),
        Err(_) => Some(("panic", 0, "a part's task failed inside the core".into())),
    }
}

async fn multipart(
    store: &dyn ObjectStore,
    gates: &Gates,
    it: &Put,
    from: Target,
    plan: Plan,
) -> Result<PutResult, Failure> {
    let mut upload = {
        let permits = gates.enter().await?;
        let r = gates
            .unless_stopped(timed(plan.timeout, store.put_multipart(&it.path)))
            .await;
        permits.settle(&r);
        r?
    };
    let res = match parts(upload.as_mut(), gates, it, from, plan).await {
        // A stop before the completion answers aborts the upload: never published after Ctrl-C.
        Ok(()) => match gates.enter().await {
            Ok(permits) => {
                let r = gates
                    .unless_stopped(timed(plan.timeout, upload.complete()))
                    .await;
                permits.settle(&r);
                r
            }
            Err(f) => Err(f),
        },
        Err(f) => Err(f),
    };
    if res.is_err() {
        abort(upload.as_mut(), gates, plan).await;
    }
    res
}

/// Aborts tried per failed multipart upload: the server keeps (and bills) its parts until one succeeds.
const ABORT_ATTEMPTS: u32 = 4;
/// The time an abort has once the call was stopped (Ctrl-C): the caller is waiting for the interrupt.
const ABORT_WHEN_STOPPED: Duration = Duration::from_secs(1);

/// Drop the parts sent. Tried again on a transient failure (the abort often races the cancelled parts'
/// requests, and a busy server may miss the deadline); an upload the server no longer knows is gone already.
/// Best effort after that: a lifecycle rule cleans what a lost abort leaves. A stopped call tries once,
/// briefly, past the gates (their places may all be held by requests being cancelled).
async fn abort(upload: &mut dyn MultipartUpload, gates: &Gates, plan: Plan) {
    if gates.stopped() {
        let _ = timed(plan.timeout.min(ABORT_WHEN_STOPPED), upload.abort()).await;
        return;
    }
    for attempt in 0..ABORT_ATTEMPTS {
        let over = match gates.enter().await {
            Err(_) => true,
            // The permits go before the pause below.
            Ok(permits) => {
                let r = timed(plan.timeout, upload.abort()).await;
                permits.settle(&r);
                matches!(r, Ok(()) | Err(("not_found" | "permission", ..)))
            }
        };
        if over {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
    }
    if gates.stopped() {
        let _ = timed(plan.timeout.min(ABORT_WHEN_STOPPED), upload.abort()).await;
    }
}

/// Run the uploads; one result per item, in order.
pub async fn run(
    built: crate::store::Built,
    items: Vec<Put>,
    from: Target,
    plan: Plan,
    stop: Stop,
) -> Vec<Done> {
    let n = items.len();
    let gates = Gates::new(plan.concurrency, &built, stop);
    let mut tasks = JoinSet::new();
    for (i, it) in items.into_iter().enumerate() {
        let store = built.store.clone();
        let gates = gates.clone();
        tasks.spawn(async move {
            let r = if it.len > plan.threshold && plan.create {
                // object_store completes multipart uploads unconditionally: never a silent overwrite.
                Err((
                    "unsupported",
                    0,
                    "a create-only multipart upload (object_store completes it without If-None-Match)".into(),
                ))
            } else if it.len > plan.threshold {
                multipart(store.as_ref(), &gates, &it, from, plan).await
            } else {
                single(store.as_ref(), &gates, &it, from, plan).await
            };
            (i, r)
        });
    }
    let lost = || {
        Err((
            "panic",
            0,
            "the upload's task failed inside the core".into(),
        ))
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use std::sync::Arc;
    use tokio::sync::Semaphore;

    fn built() -> crate::store::Built {
        crate::store::Built {
            store: Arc::new(InMemory::new()),
            gate: Arc::new(Semaphore::new(4)),
            ramp: crate::ramp::Ramp::new(4),
        }
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
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn single_and_multipart_land_their_slices() {
        let data: Vec<u8> = (0..64u8).collect();
        let b = built();
        let items = vec![
            Put {
                path: Path::from("a"),
                start: 3,
                len: 5,
            },
            Put {
                path: Path::from("b"),
                start: 10,
                len: 23,
            },
            Put {
                path: Path::from("c"),
                start: 0,
                len: 0,
            },
        ];
        let rt = rt();
        let outs = rt.block_on(run(
            b.clone(),
            items,
            Target(data.as_ptr() as usize),
            plan(false),
            go(),
        ));
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
        let one = || {
            vec![Put {
                path: Path::from("x"),
                start: 0,
                len: 8,
            }]
        };
        let to = Target(data.as_ptr() as usize);
        let first = rt.block_on(run(b.clone(), one(), to, plan(true), go()));
        assert!(first[0].error.is_none() && first[0].etag.is_some());
        let second = rt.block_on(run(b.clone(), one(), to, plan(true), go()));
        assert_eq!(second[0].error.as_ref().map(|e| e.0), Some("exists"));
        let big = vec![Put {
            path: Path::from("big"),
            start: 0,
            len: 20,
        }];
        let data = [1u8; 20];
        let refused = rt.block_on(run(
            b,
            big,
            Target(data.as_ptr() as usize),
            plan(true),
            go(),
        ));
        assert_eq!(refused[0].error.as_ref().map(|e| e.0), Some("unsupported"));
    }

    #[test]
    fn a_stopped_call_publishes_nothing() {
        let data = [3u8; 40];
        let b = built();
        let (switch, stop) = Stop::new();
        switch.send(true).unwrap();
        let items = vec![
            Put {
                path: Path::from("small"),
                start: 0,
                len: 8,
            },
            Put {
                path: Path::from("parts"),
                start: 0,
                len: 40,
            },
        ];
        let rt = rt();
        let outs = rt.block_on(run(
            b.clone(),
            items,
            Target(data.as_ptr() as usize),
            plan(false),
            stop,
        ));
        for o in &outs {
            assert_eq!(o.error.as_ref().map(|e| e.0), Some("interrupted"));
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
