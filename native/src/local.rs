//! Local files into slots of one caller buffer: `open`, `pread` and `close` per item on a few threads
//! (the calling one and the runtime's blocking pool), the GIL released for the whole batch.
//!
//! A read stops at the first short `pread` (a regular file is short only at its end), so a file smaller
//! than asked lands its bytes and says how many; the rest of its slot is left as it was. An item that
//! fails (missing, a directory, no permission) lands nothing and says why.

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::runtime::Runtime;

use crate::error::{from_io, CallError, Failure, Kind};
use crate::slots::{counts_out, int64s, nonneg, Held, ItemError, Slot};

/// One read: `dest.cap()` bytes at `offset` of `path` into its slot of the caller's buffer.
pub struct Read {
    pub path: PathBuf,
    pub offset: u64,
    pub dest: Slot,
}

/// What one read did: bytes landed (-1: the file is missing), or an error.
#[derive(Default, Debug, PartialEq)]
pub struct Outcome {
    pub got: i64,
    pub error: Option<Failure>,
}

fn failed(e: &std::io::Error, what: &str, path: &std::path::Path) -> Outcome {
    let f = from_io(e, what, path);
    Outcome {
        got: if f.kind == Kind::NotFound { -1 } else { 0 },
        error: Some(f),
    }
}

/// Read one item into its slot.
fn read_one(r: Read) -> Outcome {
    let Read {
        path,
        offset,
        mut dest,
    } = r;
    let size = dest.cap();
    if size == 0 {
        return Outcome::default();
    }
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) => return failed(&e, "open", &path),
    };
    let dest = dest.bytes_mut();
    let mut done = 0usize;
    while done < size {
        match file.read_at(&mut dest[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(k) => {
                done += k;
                if done < size {
                    break; // short read of a regular file: its end, no second call to learn it
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return failed(&e, "pread", &path),
        }
    }
    Outcome {
        got: done as i64,
        error: None,
    }
}

/// Items are claimed one at a time from a shared counter, so a slow file holds up no others.
fn claim<T, F: Fn(usize) -> T>(f: &F, n: usize, next: &AtomicUsize) -> Vec<(usize, T)> {
    let mut outs = Vec::new();
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            break;
        }
        outs.push((i, f(i)));
    }
    outs
}

/// `f(i)` for every `i < n`, `threads` at a time (the calling thread is one of them, the others come from
/// the runtime's blocking pool); None where a helper thread failed.
fn each<T, F>(rt: &Runtime, n: usize, threads: usize, f: F) -> Vec<Option<T>>
where
    T: Send + 'static,
    F: Fn(usize) -> T + Send + Sync + 'static,
{
    let f = Arc::new(f);
    let next = Arc::new(AtomicUsize::new(0));
    let helpers: Vec<_> = (1..threads.clamp(1, n.max(1)))
        .map(|_| {
            let (f, next) = (f.clone(), next.clone());
            rt.spawn_blocking(move || claim(&*f, n, &next))
        })
        .collect();
    let mut outs: Vec<Option<T>> = (0..n).map(|_| None).collect();
    let mut take = |got: Vec<(usize, T)>| {
        for (i, o) in got {
            outs[i] = Some(o);
        }
    };
    take(claim(&*f, n, &next));
    for h in helpers {
        if let Ok(got) = rt.block_on(h) {
            take(got);
        }
    }
    outs
}

fn lost() -> Failure {
    Failure::panic("the item failed inside the core")
}

/// Read every item, `threads` at a time; one outcome per item, in order.
pub fn run(rt: &Runtime, reads: Vec<Read>, threads: usize) -> Vec<Outcome> {
    let n = reads.len();
    // Each read is taken by the one thread that claims its index.
    let reads: Arc<Vec<Mutex<Option<Read>>>> =
        Arc::new(reads.into_iter().map(|r| Mutex::new(Some(r))).collect());
    each(rt, n, threads, move |i| {
        let taken = reads[i].lock().unwrap_or_else(|e| e.into_inner()).take();
        taken.map_or_else(Outcome::default, read_one)
    })
    .into_iter()
    .map(|o| {
        o.unwrap_or_else(|| Outcome {
            got: 0,
            error: Some(lost()),
        })
    })
    .collect()
}

/// Each path's size where it is a regular file (symbolic links followed), -1 where it is missing or is
/// not a regular file, or an error `(kind, errno, message)`; `threads` at a time.
pub fn sizes(rt: &Runtime, paths: Vec<PathBuf>, threads: usize) -> Vec<Outcome> {
    let n = paths.len();
    let paths = Arc::new(paths);
    each(rt, n, threads, move |i| {
        match std::fs::metadata(&paths[i]) {
            Ok(m) if m.is_file() => Outcome {
                got: m.len() as i64,
                error: None,
            },
            Ok(_) => Outcome {
                got: -1,
                error: None,
            },
            Err(e) => match failed(&e, "stat", &paths[i]) {
                o if o.got == -1 => Outcome {
                    got: -1,
                    error: None,
                },
                o => o,
            },
        }
    })
    .into_iter()
    .map(|o| {
        o.unwrap_or_else(|| Outcome {
            got: -1,
            error: Some(lost()),
        })
    })
    .collect()
}

/// Each item's count into `out`; the failed items as `(index, kind, errno, message)`.
fn report(py: Python<'_>, done: Vec<Outcome>, out: &PyBuffer<i64>) -> PyResult<Vec<ItemError>> {
    let counts: Vec<i64> = done.iter().map(|o| o.got).collect();
    out.copy_from_slice(py, &counts)?;
    Ok(done
        .into_iter()
        .enumerate()
        .filter_map(|(i, o)| o.error.map(|f| (i, f.kind.name(), f.code, f.message)))
        .collect())
}

/// Run `work` with the GIL released; a panic inside it is a `RuntimeError`.
fn released<T: Send>(py: Python<'_>, work: impl FnOnce() -> T + Send) -> Result<T, CallError> {
    py.allow_threads(|| catch_unwind(AssertUnwindSafe(work)))
        .map_err(|_| CallError::Internal("gdsstore._core: the batch failed inside the core".into()))
}

/// Read local files into slots of one buffer; see `gdsstore/_core.pyi`.
#[pyfunction]
#[pyo3(signature = (paths, offsets, sizes, buffer, slots, got, *, threads = 1))]
#[allow(clippy::too_many_arguments)]
pub fn read_files<'py>(
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
    // sizes <= 0 are skipped
    let sizes = int64s(py, WHO, "sizes", sizes, n)?
        .into_iter()
        .map(|s| s.max(0) as usize);
    let slots = int64s(py, WHO, "slots", slots, n)?;
    let offsets = nonneg(WHO, "offset", offsets)?;
    let slots = nonneg(WHO, "slot", slots)?;
    let out = counts_out(WHO, "got", got, n)?;
    let held = Held::writable(WHO, "buffer", buffer)?;
    let spans: Vec<(usize, usize)> = slots.into_iter().zip(sizes).collect();
    let dests = held.slots(WHO, &spans)?;
    let reads: Vec<Read> = paths
        .into_iter()
        .zip(offsets)
        .zip(dests)
        .map(|((path, offset), dest)| Read {
            path,
            offset: offset as u64,
            dest,
        })
        .collect();
    let rt = crate::runtime::get()?;
    // `held` stays alive (and the memory exported) until every read is over.
    let done = released(py, || run(&rt, reads, threads))?;
    drop(held);
    report(py, done, &out)
}

/// Sizes of local files; see `gdsstore/_core.pyi`.
#[pyfunction]
#[pyo3(signature = (paths, got, *, threads = 1))]
pub fn stat_files(
    py: Python<'_>,
    paths: Vec<PathBuf>,
    got: &Bound<'_, PyAny>,
    threads: usize,
) -> PyResult<Vec<ItemError>> {
    let out = counts_out("stat_files()", "got", got, paths.len())?;
    let rt = crate::runtime::get()?;
    let done = released(py, || sizes(&rt, paths, threads))?;
    report(py, done, &out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("gdsstore-core-local-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn file(name: &str, data: &[u8]) -> PathBuf {
        let p = dir().join(name);
        std::fs::File::create(&p).unwrap().write_all(data).unwrap();
        p
    }

    fn rt() -> Arc<Runtime> {
        crate::runtime::get().unwrap()
    }

    fn reads(buf: &mut [u8], items: Vec<(PathBuf, u64, usize, usize)>) -> Vec<Read> {
        let spans: Vec<(usize, usize)> = items.iter().map(|i| (i.3, i.2)).collect();
        let slots = Slot::over(buf, &spans);
        items
            .into_iter()
            .zip(slots)
            .map(|((path, offset, _, _), dest)| Read { path, offset, dest })
            .collect()
    }

    #[test]
    fn reads_land_in_their_slots() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let a = file("a", &data);
        let b = file("b", b"hello world");
        let mut buf = vec![0xA5u8; 200_000];
        let reads = reads(
            &mut buf,
            vec![
                (a.clone(), 0, data.len(), 0),
                (b.clone(), 6, 5, 100_000),
                (a, 1000, 64, 100_100),
                (b, 0, 0, 100_200),
            ],
        );
        let outs = run(&rt(), reads, 3);
        let got: Vec<i64> = outs.iter().map(|o| o.got).collect();
        assert_eq!(got, vec![100_000, 5, 64, 0]);
        assert!(outs.iter().all(|o| o.error.is_none()));
        assert_eq!(&buf[..100_000], &data[..]);
        assert_eq!(&buf[100_000..100_005], b"world");
        assert_eq!(&buf[100_100..100_164], &data[1000..1064]);
        assert!(buf[100_005..100_100].iter().all(|&b| b == 0xA5));
        assert!(buf[100_164..].iter().all(|&b| b == 0xA5));
    }

    #[test]
    fn failures_are_per_item_and_land_nothing() {
        let short = file("short", b"abc");
        let d = dir().join("sub");
        std::fs::create_dir_all(&d).unwrap();
        let mut buf = vec![0xA5u8; 64];
        let reads = reads(
            &mut buf,
            vec![
                (short.clone(), 0, 16, 0),
                (dir().join("missing"), 0, 16, 16),
                (d, 0, 16, 32),
                (short.join("below-a-file"), 0, 16, 48),
            ],
        );
        let outs = run(&rt(), reads, 2);
        assert_eq!(
            outs[0],
            Outcome {
                got: 3,
                error: None
            }
        );
        assert_eq!(&buf[..3], b"abc");
        let kinds: Vec<_> = outs
            .iter()
            .map(|o| o.error.as_ref().map(|e| e.kind.name()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                None,
                Some("not_found"),
                Some("is_directory"),
                Some("not_found")
            ]
        );
        assert_eq!(
            outs.iter().map(|o| o.got).collect::<Vec<_>>(),
            vec![3, -1, 0, -1]
        );
        assert!(outs[2].error.as_ref().unwrap().message.contains("sub"));
        assert!(buf[3..].iter().all(|&b| b == 0xA5));
    }

    #[test]
    fn sizes_of_files_and_the_rest() {
        let a = file("sized", &[7u8; 1234]);
        let d = dir().join("sub2");
        std::fs::create_dir_all(&d).unwrap();
        let paths = vec![a.clone(), d, dir().join("nope"), a.join("below")];
        let outs = sizes(&rt(), paths, 2);
        assert_eq!(
            outs.iter().map(|o| o.got).collect::<Vec<_>>(),
            vec![1234, -1, -1, -1]
        );
        assert!(outs.iter().all(|o| o.error.is_none()));
    }
}
