//! One wave: many GETs on one store, at most `concurrency` in flight, each body written into its slot of
//! one caller buffer. Every answer is checked: status, Content-Range (object_store checks it against the
//! range asked, and that a range was answered with 206), the body's length against what was asked or
//! expected, and Content-Encoding (must be absent or identity). Nothing is retried here: Python's retry
//! policy decides from each item's error kind.

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use object_store::path::Path;
use object_store::{Attribute, GetOptions, GetRange, GetResult, ObjectStore};
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

use crate::error::{CallError, Failure, Kind};
use crate::limits::{closed, connection};
use crate::ramp::{Answer, Ramp, Ticket};
use crate::slots::{counts_out, int64s, nonneg, Held, ItemError, Slot};
use crate::stop::Stop;
use crate::store::{Built, Store};

/// One request: `range` (None: the whole object), where its body goes, and the size it must have.
pub struct Item {
    pub path: Path,
    pub range: Option<GetRange>,
    pub expect: Option<u64>,
    pub dest: Slot,
    /// The ETag the object must have: sent as `If-Match`, and checked on the answer before its body
    /// lands (a server that ignores `If-Match` still fails the item, kind changed).
    pub if_match: Option<String>,
    /// The object version to read (S3 `versionId`); None: the current one.
    pub version: Option<String>,
}

/// What one request did: bytes landed, or an error `(kind, status, message)`.
#[derive(Default)]
pub struct Outcome {
    pub got: i64,
    pub total: i64,
    pub etag: Option<String>,
    pub version: Option<String>,
    pub error: Option<Failure>,
}

/// A wave's pieces in consecutive runs (segments), each reported once every piece of it is over: the caller
/// moves a segment's bytes on (to a GPU) while the rest of the wave is in flight.
pub struct Segments {
    /// The segment of each item of the wave (its plan's items, in order).
    of_item: Vec<usize>,
    /// Items of each segment not over yet.
    left: Vec<AtomicUsize>,
    /// Whether an item of each segment failed (or was refused before the wave).
    failed: Vec<AtomicBool>,
    tx: mpsc::UnboundedSender<Note>,
}

/// A segment that is over: its number, and whether every piece of it landed.
pub type Note = (usize, bool);

impl Segments {
    /// The segments ending before rows `ends` (increasing, the last the number of rows) of the items at
    /// table rows `rows` (the others were refused before the wave: their segments fail). A segment with no
    /// item to wait for is over at once.
    fn new(ends: &[usize], rows: &[usize], tx: mpsc::UnboundedSender<Note>) -> Self {
        let segment_of = |row: usize| ends.partition_point(|&e| e <= row);
        let of_item: Vec<usize> = rows.iter().map(|&r| segment_of(r)).collect();
        let mut count = vec![0usize; ends.len()];
        for &k in &of_item {
            count[k] += 1;
        }
        let mut start = 0;
        let failed = ends
            .iter()
            .zip(&count)
            .map(|(&end, &c)| {
                let refused = c < end - start; // rows of it that are no items
                start = end;
                AtomicBool::new(refused)
            })
            .collect::<Vec<_>>();
        for (k, &c) in count.iter().enumerate() {
            if c == 0 {
                let _ = tx.send((k, false)); // every row of it was refused
            }
        }
        let left = count.into_iter().map(AtomicUsize::new).collect();
        Segments {
            of_item,
            left,
            failed,
            tx,
        }
    }

    /// Item `i` is over (`ok`: landed): its segment is reported when it was the last one.
    fn over(&self, i: usize, ok: bool) {
        let k = self.of_item[i];
        if !ok {
            self.failed[k].store(true, Ordering::SeqCst);
        }
        if self.left[k].fetch_sub(1, Ordering::AcqRel) == 1 {
            // The receiver is gone only once the call is over: nobody to tell.
            let _ = self.tx.send((k, !self.failed[k].load(Ordering::SeqCst)));
        }
    }
}

/// Write the body of `res` into the slot; the number of bytes it had. A body that breaks leaves its
/// checked prefix landed; `partial` says how long it is, so a retry can ask for the rest only.
async fn land(
    res: GetResult,
    dest: &mut Slot,
    read_timeout: Duration,
    partial: &mut u64,
) -> Result<u64, Failure> {
    let want = res.range.end - res.range.start;
    if want > dest.cap() as u64 {
        return Err(Failure::new(
            Kind::TooLarge,
            format!("{want} bytes do not fit its slot of {}", dest.cap()),
        ));
    }
    let mut stream = res.into_stream();
    let mut off: u64 = 0;
    loop {
        let next = tokio::time::timeout(read_timeout, stream.next())
            .await
            .map_err(|_| {
                Failure::new(Kind::Timeout, format!("no body bytes for {read_timeout:?}"))
            })?;
        let Some(chunk) = next else { break };
        let chunk = chunk.map_err(|e| Failure::from(&e))?;
        let n = chunk.len() as u64;
        if off + n > want || !dest.write(off as usize, &chunk) {
            return Err(Failure::new(
                Kind::Length,
                format!("body longer than the {want} bytes announced"),
            ));
        }
        off += n;
        *partial = off;
    }
    if off != want {
        return Err(Failure::new(
            Kind::Short,
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
            return Err(Failure::new(
                Kind::Changed,
                format!("ETag {got:?} answered, {want:?} asked (If-Match)"),
            ));
        }
    }
    if let Some(enc) = res.attributes.get(&Attribute::ContentEncoding) {
        let enc: &str = enc.as_ref();
        if !enc.is_empty() && !enc.eq_ignore_ascii_case("identity") {
            return Err(Failure::new(
                Kind::Encoding,
                format!("Content-Encoding {enc:?} (bytes would not be the object's)"),
            ));
        }
    }
    let len = res.range.end - res.range.start;
    if let Some(e) = it.expect {
        if len != e {
            return Err(Failure::new(
                Kind::Length,
                format!("answer of {len} bytes, {e} expected"),
            ));
        }
    }
    Ok(())
}

async fn fetch(
    store: Arc<dyn ObjectStore>,
    mut it: Item,
    read_timeout: Duration,
    ticket: Ticket,
) -> Outcome {
    let opts = GetOptions {
        range: it.range.clone(),
        if_match: it.if_match.clone(),
        version: it.version.clone(),
        ..Default::default()
    };
    let mut out = Outcome::default();
    let answer = match tokio::time::timeout(read_timeout, store.get_opts(&it.path, opts)).await {
        Err(_) => Err(Failure::new(
            Kind::Timeout,
            format!("no answer for {read_timeout:?}"),
        )),
        Ok(Err(e)) => Err(Failure::from(&e)),
        Ok(Ok(res)) => Ok(res),
    };
    // The ramp counts requests until their answer: the body is not its business.
    ticket.settle(Answer::of(answer.as_ref().err()));
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
    if let Err(f) = check_answer(&res, &it) {
        out.error = Some(f);
        return out;
    }
    let mut partial = 0u64;
    match land(res, &mut it.dest, read_timeout, &mut partial).await {
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
    built: Built,
    items: Vec<Item>,
    concurrency: usize,
    read_timeout: Duration,
    stop: Stop,
    segments: Option<Arc<Segments>>,
) -> Vec<Outcome> {
    let n = items.len();
    let concurrency = concurrency.max(1);
    // Items of 1 MiB and more: a lane each (a task per request costs nothing beside their copies, and tokio
    // spreads the copies over every worker).
    let big = items.iter().map(|it| it.dest.cap()).sum::<usize>() >= n * BIG_ITEM;
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
    let per_lane = n.div_ceil(lanes);
    for l in 0..lanes {
        // the lanes' widths add up to `concurrency` (or to the items, for a short wave)
        let width = (concurrency / lanes + usize::from(l < concurrency % lanes)).min(per_lane);
        let lane = Lane {
            queue: queue.clone(),
            store: built.store.clone(),
            conn: built.connections.clone(),
            ramp: built.ramp.clone(),
            read_timeout,
            segments: segments.clone(),
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
        Failure::interrupted
    } else {
        || Failure::panic("the request's task failed inside the core")
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
    read_timeout: Duration,
    /// Told of each request once it is over (its bytes landed, or not).
    segments: Option<Arc<Segments>>,
}

impl Lane {
    fn next(&self) -> Option<(usize, Item)> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).next()
    }

    async fn one(&self, i: usize, it: Item) -> (usize, Outcome) {
        let out = self.request(it).await;
        if let Some(s) = &self.segments {
            s.over(i, out.error.is_none());
        }
        (i, out)
    }

    async fn request(&self, it: Item) -> Outcome {
        let permit = match connection(&self.conn).await {
            Ok(permit) => permit,
            Err(f) => return failed(f),
        };
        // Waiting for a place in the ramp is not the server's time: the timeouts start after it.
        let Some(ticket) = self.ramp.enter().await else {
            return failed(closed());
        };
        let fetched = fetch(self.store.clone(), it, self.read_timeout, ticket);
        let out = AssertUnwindSafe(fetched).catch_unwind().await;
        drop(permit);
        out.unwrap_or_else(|_| failed(Failure::panic("the request failed inside the core")))
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

fn range_of(start: i64, end: i64) -> Result<Option<GetRange>, String> {
    match (start, end) {
        (0, e) if e < 0 => Ok(None),
        (s, _) if s < 0 => Ok(Some(GetRange::Suffix(s.unsigned_abs()))),
        (s, e) if e < 0 => Ok(Some(GetRange::Offset(s as u64))),
        (s, e) if e > s => Ok(Some(GetRange::Bounded(s as u64..e as u64))),
        (s, e) => Err(format!("empty range {s}..{e}")),
    }
}

/// The items of a wave, in the order asked; each also says which entry it answers. Entries whose path
/// object_store cannot take are answered "unsupported" at once, without a request.
struct Plan {
    items: Vec<Item>,
    index: Vec<usize>,
    outs: Vec<Outcome>,
}

fn plan(
    paths: Vec<String>,
    starts: &[i64],
    ends: &[i64],
    expect: &[i64],
    dests: Vec<Slot>,
    if_match: Option<Vec<Option<String>>>,
    versions: Option<Vec<Option<String>>>,
) -> Plan {
    let mut if_match = if_match.unwrap_or_default().into_iter();
    let mut versions = versions.unwrap_or_default().into_iter();
    let n = paths.len();
    let mut p = Plan {
        items: Vec::with_capacity(n),
        index: Vec::with_capacity(n),
        outs: (0..n).map(|_| Outcome::default()).collect(),
    };
    for (i, (path, dest)) in paths.into_iter().zip(dests).enumerate() {
        let tag = if_match.next().flatten();
        let version = versions.next().flatten();
        let parsed = Path::parse(&path).map_err(|e| e.to_string());
        match (parsed, range_of(starts[i], ends[i])) {
            (Ok(path), Ok(range)) => {
                p.items.push(Item {
                    path,
                    range,
                    expect: u64::try_from(expect[i]).ok(),
                    dest,
                    if_match: tag,
                    version,
                });
                p.index.push(i);
            }
            (Err(e), _) | (_, Err(e)) => p.outs[i].error = Some(Failure::new(Kind::Unsupported, e)),
        }
    }
    p
}

fn check_lists(
    who: &str,
    n: usize,
    per_path: [(&str, Option<&Vec<Option<String>>>); 2],
    timeout: f64,
) -> Result<(), CallError> {
    for (name, list) in per_path {
        if list.is_some_and(|m| m.len() != n) {
            return Err(CallError::Args(format!(
                "{who}: `{name}` must have one entry per path"
            )));
        }
    }
    if !(timeout > 0.0 && timeout.is_finite()) {
        return Err(CallError::Args(format!(
            "{who}: `timeout` must be > 0, got {timeout}"
        )));
    }
    Ok(())
}

/// A wave's pieces as Python's `PieceTable` holds them (attributes of these names), one entry each: the
/// paths; int64 arrays `starts`/`ends` (as `range_of` reads them), `expect` (-1: unknown), `slots` and `caps`
/// (a piece's body goes into `buffer[slot..slot + cap]`); `if_match` and `versions` per piece, or None.
#[derive(FromPyObject)]
pub struct Table<'py> {
    #[pyo3(attribute)]
    paths: Vec<String>,
    #[pyo3(attribute)]
    starts: Bound<'py, PyAny>,
    #[pyo3(attribute)]
    ends: Bound<'py, PyAny>,
    #[pyo3(attribute)]
    expect: Bound<'py, PyAny>,
    #[pyo3(attribute)]
    slots: Bound<'py, PyAny>,
    #[pyo3(attribute)]
    caps: Bound<'py, PyAny>,
    #[pyo3(attribute)]
    if_match: Option<Vec<Option<String>>>,
    #[pyo3(attribute)]
    versions: Option<Vec<Option<String>>>,
}

/// The name of the Python function, in its messages.
const WHO: &str = "read_table()";

/// Run the wave of `table` into `buffer`: one outcome per piece, in order.
fn outcomes(
    py: Python<'_>,
    store: &Store,
    table: Table<'_>,
    buffer: &Bound<'_, PyAny>,
    concurrency: usize,
    timeout: f64,
    segments: Option<(Vec<usize>, Py<PyAny>)>,
) -> PyResult<Vec<Outcome>> {
    let n = table.paths.len();
    let per_path = [
        ("if_match", table.if_match.as_ref()),
        ("versions", table.versions.as_ref()),
    ];
    check_lists(WHO, n, per_path, timeout)?;
    let column = |what: &str, obj: &Bound<'_, PyAny>| int64s(py, WHO, what, obj, n);
    let slots = nonneg(WHO, "slot", column("slots", &table.slots)?)?;
    let caps = nonneg(WHO, "cap", column("caps", &table.caps)?)?;
    let spans: Vec<_> = slots.into_iter().zip(caps).collect();
    let held = Held::writable(WHO, "buffer", buffer)?;
    let dests = held.slots(WHO, &spans)?;
    let Plan {
        items,
        index,
        mut outs,
    } = plan(
        table.paths,
        &column("starts", &table.starts)?,
        &column("ends", &table.ends)?,
        &column("expect", &table.expect)?,
        dests,
        table.if_match,
        table.versions,
    );
    let built = store.get()?;
    let rt = crate::runtime::get()?;
    let read_timeout = Duration::from_secs_f64(timeout);
    let (segments, notes) = match segments {
        Some((ends, on_segment)) => {
            let (tx, rx) = mpsc::unbounded_channel();
            let take = move |py: Python<'_>, (k, ok): Note| on_segment.call1(py, (k, ok)).map(drop);
            let notes: crate::stop::Notes<Note> = (rx, Box::new(take));
            (
                Some(Arc::new(Segments::new(&ends, &index, tx))),
                Some(notes),
            )
        }
        None => (None, None),
    };
    // `held` stays alive (and the memory exported) until the wave is over, interrupted or not.
    let done = crate::stop::run_noting(
        py,
        &rt,
        |stop| run(built, items, concurrency, read_timeout, stop, segments),
        notes,
    )
    .map_err(|_| CallError::Internal("gdsstore._core: the wave failed inside the core".into()))??;
    for (i, o) in index.into_iter().zip(done) {
        outs[i] = o;
    }
    drop(held);
    Ok(outs)
}

/// One wave of GETs given as a table of columns: no Python object per item but its path and ETag; see
/// `gdsstore/_core.pyi`.
#[pyfunction]
#[pyo3(signature = (
    store, table, buffer, got, total, *, concurrency = 256, timeout = 30.0, segments = None, on_segment = None
))]
#[allow(clippy::too_many_arguments)]
pub fn read_table<'py>(
    py: Python<'py>,
    store: &Store,
    table: Table<'py>,
    buffer: &Bound<'py, PyAny>,
    got: &Bound<'py, PyAny>,
    total: &Bound<'py, PyAny>,
    concurrency: usize,
    timeout: f64,
    segments: Option<Bound<'py, PyAny>>,
    on_segment: Option<Py<PyAny>>,
) -> PyResult<TableRows> {
    let n = table.paths.len();
    let (got_out, total_out) = (
        counts_out(WHO, "got", got, n)?,
        counts_out(WHO, "total", total, n)?,
    );
    let segments = segment_ends(py, n, segments, on_segment)?;
    let outs = outcomes(py, store, table, buffer, concurrency, timeout, segments)?;
    got_out.copy_from_slice(py, &outs.iter().map(|o| o.got).collect::<Vec<_>>())?;
    total_out.copy_from_slice(py, &outs.iter().map(|o| o.total).collect::<Vec<_>>())?;
    let versioned = outs.iter().any(|o| o.version.is_some());
    let mut tags = Vec::with_capacity(n);
    let mut ids = Vec::with_capacity(if versioned { n } else { 0 });
    let mut failed = Vec::new();
    for (i, o) in outs.into_iter().enumerate() {
        tags.push(o.etag);
        if versioned {
            ids.push(o.version);
        }
        if let Some(f) = o.error {
            failed.push((i, f.kind.name(), f.code, f.message));
        }
    }
    Ok((tags, versioned.then_some(ids), failed))
}

/// `segments` (the row each segment ends before: increasing, the last `n`) with the function told of each,
/// both given or neither.
fn segment_ends(
    py: Python<'_>,
    n: usize,
    segments: Option<Bound<'_, PyAny>>,
    on_segment: Option<Py<PyAny>>,
) -> PyResult<Option<(Vec<usize>, Py<PyAny>)>> {
    let (ends, on_segment) = match (segments, on_segment) {
        (None, None) => return Ok(None),
        (Some(ends), Some(f)) => (ends, f),
        _ => {
            return Err(CallError::Args(format!(
                "{WHO}: `segments` and `on_segment` go together (give both, or neither)"
            ))
            .into())
        }
    };
    let ends = PyBuffer::<i64>::get(&ends)?.to_vec(py)?;
    let increasing = ends.windows(2).all(|w| w[0] < w[1]) && ends.first().is_none_or(|&e| e > 0);
    if !increasing || ends.last().copied().unwrap_or(0) != n as i64 {
        return Err(CallError::Args(format!(
            "{WHO}: `segments` must be the increasing rows each segment ends before, the last {n} (the \
             number of paths), got {ends:?}"
        ))
        .into());
    }
    Ok(Some((
        ends.into_iter().map(|e| e as usize).collect(),
        on_segment,
    )))
}

/// [`read_table`]'s answer beside the counts it writes: each item's ETag, the version ids (None where no
/// answer had one) and the failed items.
type TableRows = (
    Vec<Option<String>>,
    Option<Vec<Option<String>>>,
    Vec<ItemError>,
);

#[cfg(test)]
mod tests {
    use super::*;

    fn notes(rx: &mut mpsc::UnboundedReceiver<Note>) -> Vec<Note> {
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    #[test]
    fn a_segment_is_told_once_its_last_item_is_over() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        // rows 0..5 in segments [0, 2), [2, 3), [3, 5); row 2 refused before the wave (no item)
        let s = Segments::new(&[2, 3, 5], &[0, 1, 3, 4], tx);
        assert_eq!(notes(&mut rx), vec![(1, false)]); // nothing to wait for, and it failed
        s.over(1, true);
        s.over(3, false);
        assert_eq!(notes(&mut rx), vec![]);
        s.over(0, true);
        assert_eq!(notes(&mut rx), vec![(0, true)]);
        s.over(2, true);
        assert_eq!(notes(&mut rx), vec![(2, false)]); // item 3 failed
    }
}
