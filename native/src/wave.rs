//! One wave: many GETs on one store, at most `concurrency` in flight, each body written into its slot of
//! one caller buffer. Every answer is checked: status, Content-Range (object_store checks it against the
//! range asked, and that a range was answered with 206), the body's length against what was asked or
//! expected, and Content-Encoding (must be absent or identity). Nothing is retried here: Python's retry
//! policy decides from each item's error kind.

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use object_store::client::{HttpError, HttpErrorKind};
use object_store::path::Path;
use object_store::{Attribute, GetOptions, GetRange, GetResult, ObjectStore};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::ramp::{answer_of, Ramp, Ticket};
use crate::stop::Stop;

/// One request: `range` (None: the whole object), where its body goes, and the size it must have.
pub struct Item {
    pub path: Path,
    pub range: Option<GetRange>,
    pub expect: Option<u64>,
    pub slot: usize,
    pub cap: usize,
    /// The ETag the object must have: sent as `If-Match`, and checked on the answer before its body
    /// lands (a server that ignores `If-Match` still fails the item, kind changed).
    pub if_match: Option<String>,
}

/// What one request did: bytes landed, or an error `(kind, status, message)`.
#[derive(Default)]
pub struct Outcome {
    pub got: i64,
    pub total: i64,
    pub etag: Option<String>,
    pub mtime_ns: i64,
    pub version: Option<String>,
    pub error: Option<(&'static str, u16, String)>,
}

pub type Failure = (&'static str, u16, String);

/// The base address of the caller's buffer, shared by the tasks; each writes only inside its own slot
/// (slots are checked in bounds and disjoint before the wave starts).
#[derive(Clone, Copy)]
pub struct Target(pub usize);

/// Remove what may be a secret from a message: a URL's query string (a signature or token).
pub fn scrub(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut skipping = false;
    for c in msg.chars() {
        if c == '?' {
            skipping = true;
            out.push_str("?<redacted>");
            continue;
        }
        if skipping && (c.is_whitespace() || c == '"' || c == '\'' || c == ')') {
            skipping = false;
        }
        if !skipping {
            out.push(c);
        }
    }
    out
}

fn status_in(msg: &str) -> Option<u16> {
    let at = msg.find("status code: ")? + "status code: ".len();
    msg.get(at..at + 3)?.parse().ok()
}

fn http_kind(e: &(dyn std::error::Error + 'static)) -> Option<HttpErrorKind> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(h) = err.downcast_ref::<HttpError>() {
            return Some(h.kind());
        }
        cur = err.source();
    }
    None
}

/// Every message of an error's chain, joined (object_store's own text says "error sending request" where
/// its sources say why).
fn chain_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let t = err.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = err.source();
    }
    parts.join(": ")
}

/// A TLS failure that no retry mends (the server's certificate is not trusted, expired, for another name),
/// named by its cause.
fn tls_failure(e: &object_store::Error) -> Option<Failure> {
    let text = chain_text(e);
    let lower = text.to_ascii_lowercase();
    let at = lower
        .find("invalid peer certificate")
        .or_else(|| lower.find("certificate"))?;
    let cause = text[at..]
        .split(": ")
        .take(2)
        .collect::<Vec<_>>()
        .join(": ");
    Some((
        "tls",
        0,
        format!("TLS: the server's certificate was refused ({cause})"),
    ))
}

/// The kind of a failure, for Python's exception tree and retry policy.
pub fn classify(e: &object_store::Error) -> Failure {
    use object_store::Error as E;
    if let Some(f) = tls_failure(e) {
        return f;
    }
    let msg = scrub(&e.to_string());
    let (kind, status) = match e {
        E::NotFound { .. } => ("not_found", 404),
        E::PermissionDenied { .. } => ("permission", 403),
        E::Unauthenticated { .. } => ("permission", 401),
        E::Precondition { .. } => ("changed", 412),
        E::AlreadyExists { .. } => ("exists", 412),
        E::NotSupported { .. } => ("range_ignored", 200),
        _ => match status_in(&msg) {
            Some(404) => ("not_found", 404),
            Some(s @ (401 | 403)) => ("permission", s),
            Some(s) => ("status", s),
            None if msg.contains("non-partial response") => ("range_ignored", 200),
            None if msg.contains("Content-Length Header missing") => ("unsupported", 0),
            None if msg.contains("Content-Range") || msg.contains("Requested ") => ("range", 206),
            // object_store's RetryError hides its HttpError from `source()` (transparent): read the text too.
            None => match http_kind(e) {
                Some(HttpErrorKind::Timeout) => ("timeout", 0),
                Some(HttpErrorKind::Connect) => ("connect", 0),
                Some(_) => ("io", 0),
                None if msg.contains("error sending request") => ("connect", 0),
                None if msg.contains("timed out") => ("timeout", 0),
                None if msg.contains("HTTP error") => ("io", 0),
                None => ("invalid", 0),
            },
        },
    };
    (kind, status, msg)
}

fn fail(kind: &'static str, msg: String) -> Failure {
    (kind, 0, msg)
}

/// Write the body of `res` into the slot; the number of bytes it had. A body that breaks leaves its
/// checked prefix landed; `partial` says how long it is, so a retry can ask for the rest only.
async fn land(
    res: GetResult,
    it: &Item,
    to: Target,
    read_timeout: Duration,
    partial: &mut u64,
) -> Result<u64, Failure> {
    let want = res.range.end - res.range.start;
    if want > it.cap as u64 {
        return Err((
            "too_large",
            0,
            format!("{want} bytes do not fit its slot of {}", it.cap),
        ));
    }
    let mut stream = res.into_stream();
    let mut off: u64 = 0;
    loop {
        let next = tokio::time::timeout(read_timeout, stream.next())
            .await
            .map_err(|_| fail("timeout", format!("no body bytes for {read_timeout:?}")))?;
        let Some(chunk) = next else { break };
        let chunk = chunk.map_err(|e| classify(&e))?;
        let n = chunk.len() as u64;
        if off + n > want {
            return Err(fail(
                "length",
                format!("body longer than the {want} bytes announced"),
            ));
        }
        // SAFETY: [slot, slot + cap) lies inside the caller's buffer, no other task writes there, and
        // off + n <= want <= cap was checked above.
        unsafe {
            std::ptr::copy_nonoverlapping(
                chunk.as_ptr(),
                (to.0 + it.slot + off as usize) as *mut u8,
                chunk.len(),
            );
        }
        off += n;
        *partial = off;
    }
    if off != want {
        return Err(fail(
            "short",
            format!("body ended after {off} of {want} bytes"),
        ));
    }
    Ok(off)
}

/// An ETag as compared: without `W/` and quotes (servers and clients differ there).
fn bare_etag(tag: &str) -> &str {
    tag.trim_start_matches("W/").trim_matches('"')
}

fn check_answer(res: &GetResult, it: &Item) -> Result<(), Failure> {
    if let Some(want) = &it.if_match {
        let got = res.meta.e_tag.as_deref().unwrap_or("");
        if bare_etag(got) != bare_etag(want) {
            return Err((
                "changed",
                0,
                format!("ETag {got:?} answered, {want:?} asked (If-Match)"),
            ));
        }
    }
    if let Some(enc) = res.attributes.get(&Attribute::ContentEncoding) {
        let enc: &str = enc.as_ref();
        if !enc.is_empty() && !enc.eq_ignore_ascii_case("identity") {
            return Err(fail(
                "encoding",
                format!("Content-Encoding {enc:?} (bytes would not be the object's)"),
            ));
        }
    }
    let len = res.range.end - res.range.start;
    if let Some(e) = it.expect {
        if len != e {
            return Err(fail(
                "length",
                format!("answer of {len} bytes, {e} expected"),
            ));
        }
    }
    Ok(())
}

async fn fetch(
    store: Arc<dyn ObjectStore>,
    it: Item,
    to: Target,
    read_timeout: Duration,
    ticket: Ticket,
) -> Outcome {
    let opts = GetOptions {
        range: it.range.clone(),
        if_match: it.if_match.clone(),
        ..Default::default()
    };
    let mut out = Outcome::default();
    let answer = match tokio::time::timeout(read_timeout, store.get_opts(&it.path, opts)).await {
        Err(_) => Err(fail("timeout", format!("no answer for {read_timeout:?}"))),
        Ok(Err(e)) => Err(classify(&e)),
        Ok(Ok(res)) => Ok(res),
    };
    // The ramp counts requests until their answer: the body is not its business.
    ticket.settle(answer_of(answer.as_ref().err()));
    let res = match answer {
        Err(f) => {
            out.error = Some(f);
            return out;
        }
        Ok(res) => res,
    };
    out.total = res.meta.size as i64;
    out.etag = res.meta.e_tag.clone();
    out.version = res.meta.version.clone();
    out.mtime_ns = res.meta.last_modified.timestamp_nanos_opt().unwrap_or(0);
    if let Err(f) = check_answer(&res, &it) {
        out.error = Some(f);
        return out;
    }
    let mut partial = 0u64;
    match land(res, &it, to, read_timeout, &mut partial).await {
        Ok(n) => out.got = n as i64,
        Err(f) => {
            out.got = partial as i64;
            out.error = Some(f);
        }
    }
    out
}

/// Run the wave; one outcome per item, in order.
///
/// The requests run in lanes, one task each (as many as the runtime has workers, at most `concurrency`):
/// a lane keeps its share of the requests in flight and takes the next item from the wave's queue as one
/// finishes. A task and a permit per request cost two or three wake-ups of other threads per request.
pub async fn run(
    built: crate::store::Built,
    items: Vec<Item>,
    to: Target,
    concurrency: usize,
    read_timeout: Duration,
    stop: Stop,
) -> Vec<Outcome> {
    let n = items.len();
    let concurrency = concurrency.max(1);
    // Items of 1 MiB and more: a lane each (a task per request costs nothing beside their copies, and tokio
    // spreads the copies over every worker; 16 lanes read 256 x 4 MiB 10 % slower on the H200).
    let big = items.iter().map(|it| it.cap).sum::<usize>() >= n * BIG_ITEM;
    let lanes = if big {
        concurrency
    } else {
        crate::runtime::workers().min(concurrency)
    };
    let lanes = lanes.min(n).max(1);
    let queue = Arc::new(Mutex::new(items.into_iter().enumerate()));
    let mut tasks = JoinSet::new();
    // A lane fills its width from the queue as soon as it starts: capped at its share of the items, or the
    // first lanes would take a short wave's items all (64 chunks of 4 MiB on 4 of 16 threads).
    let share = n.div_ceil(lanes);
    for l in 0..lanes {
        // the lanes' widths add up to `concurrency` (or to the items, for a short wave)
        let width = (concurrency / lanes + usize::from(l < concurrency % lanes)).min(share);
        let lane = Lane {
            queue: queue.clone(),
            store: built.store.clone(),
            conn: built.gate.clone(),
            ramp: built.ramp.clone(),
            to,
            read_timeout,
        };
        tasks.spawn(lane.run(width));
    }
    let mut outs: Vec<Option<Outcome>> = (0..n).map(|_| None).collect();
    let mut stopped = false;
    loop {
        let joined = tokio::select! {
            biased;
            _ = stop.wait(), if !stopped => None,
            j = tasks.join_next() => Some(j),
        };
        match joined {
            Some(None) => break,
            Some(Some(j)) => {
                for (i, out) in j.unwrap_or_default() {
                    outs[i] = Some(out);
                }
            }
            None => {
                // Cancelled at their next await; the loop waits until every lane is over, so none
                // writes into the caller's buffer after the call returns.
                tasks.abort_all();
                stopped = true;
            }
        }
    }
    let lost: fn() -> Failure = if stopped {
        crate::stop::interrupted
    } else {
        || fail("panic", "the request's task failed inside the core".into())
    };
    outs.into_iter()
        .map(|o| o.unwrap_or_else(|| failed(lost())))
        .collect()
}

/// The outcome of a request that failed before or outside its answer.
fn failed(f: Failure) -> Outcome {
    Outcome {
        error: Some(f),
        ..Outcome::default()
    }
}

/// Bytes from which an item has a lane of its own.
const BIG_ITEM: usize = 1 << 20;

type Queue = Arc<Mutex<std::iter::Enumerate<std::vec::IntoIter<Item>>>>;

/// One lane of a wave: up to `width` of its requests in flight at once.
struct Lane {
    queue: Queue,
    store: Arc<dyn ObjectStore>,
    /// The store's bound on its connections, across concurrent calls.
    conn: Arc<Semaphore>,
    /// The store's ramp of requests waiting for an answer.
    ramp: Arc<Ramp>,
    to: Target,
    read_timeout: Duration,
}

impl Lane {
    fn next(&self) -> Option<(usize, Item)> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).next()
    }

    async fn one(&self, i: usize, it: Item) -> (usize, Outcome) {
        let permit = match crate::gates::connection(&self.conn).await {
            Ok(permit) => permit,
            Err(f) => return (i, failed(f)),
        };
        // Waiting for a place in the ramp is not the server's time: the timeouts start after it.
        let Some(ticket) = self.ramp.enter().await else {
            return (i, failed(crate::gates::closed()));
        };
        let fetched = fetch(self.store.clone(), it, self.to, self.read_timeout, ticket);
        let out = AssertUnwindSafe(fetched).catch_unwind().await;
        drop(permit);
        (
            i,
            out.unwrap_or_else(|_| {
                failed(fail("panic", "the request failed inside the core".into()))
            }),
        )
    }

    async fn run(self, width: usize) -> Vec<(usize, Outcome)> {
        let mut done = Vec::new();
        let mut running = FuturesUnordered::new();
        loop {
            while running.len() < width {
                let Some((i, it)) = self.next() else { break };
                running.push(self.one(i, it));
            }
            match running.next().await {
                Some(out) => done.push(out),
                None => return done,
            }
        }
    }
}
