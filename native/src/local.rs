//! Local files into slots of one caller buffer: `open`, `pread` and `close` per item on a few threads
//! (the calling one and the runtime's blocking pool), the GIL released for the whole batch.
//!
//! A read stops at the first short `pread` (a regular file is short only at its end), so a file smaller
//! than asked lands its bytes and says how many; the rest of its slot is left as it was. An item that
//! fails (missing, a directory, no permission) lands nothing and says why.

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::runtime::Runtime;

use crate::wave::Target;

/// One read: `size` bytes at `offset` of `path` into `[slot, slot + size)` of the caller's buffer.
pub struct Read {
    pub path: PathBuf,
    pub offset: u64,
    pub size: usize,
    pub slot: usize,
}

/// What one read did: bytes landed (-1: the file is missing), or an error `(kind, errno, message)`.
#[derive(Default, Debug, PartialEq)]
pub struct Outcome {
    pub got: i64,
    pub error: Option<(&'static str, i32, String)>,
}

fn failed(e: &std::io::Error, what: &str, path: &std::path::Path) -> Outcome {
    let kind = match e.kind() {
        ErrorKind::NotFound | ErrorKind::NotADirectory => "not_found",
        ErrorKind::IsADirectory => "is_directory",
        ErrorKind::PermissionDenied => "permission",
        _ => "io",
    };
    Outcome {
        got: if kind == "not_found" { -1 } else { 0 },
        error: Some((
            kind,
            e.raw_os_error().unwrap_or(0),
            format!("{what} {}: {e}", path.display()),
        )),
    }
}

/// Read one item into its slot.
fn read_one(r: &Read, to: Target) -> Outcome {
    if r.size == 0 {
        return Outcome::default();
    }
    let file = match File::open(&r.path) {
        Ok(f) => f,
        Err(e) => return failed(&e, "open", &r.path),
    };
    // SAFETY: [slot, slot + size) lies inside the caller's buffer (checked before the batch starts), no
    // other read writes there (slots are disjoint), and the buffer stays exported until the batch ends.
    let dest = unsafe { std::slice::from_raw_parts_mut((to.0 + r.slot) as *mut u8, r.size) };
    let mut done = 0usize;
    while done < r.size {
        match file.read_at(&mut dest[done..], r.offset + done as u64) {
            Ok(0) => break,
            Ok(k) => {
                done += k;
                if done < r.size {
                    break; // short read of a regular file: its end, no second call to learn it
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return failed(&e, "pread", &r.path),
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

fn lost() -> (&'static str, i32, String) {
    ("panic", 0, "the item failed inside the core".into())
}

/// Read every item, `threads` at a time; one outcome per item, in order.
pub fn run(rt: &Runtime, reads: Vec<Read>, to: Target, threads: usize) -> Vec<Outcome> {
    let n = reads.len();
    let reads = Arc::new(reads);
    each(rt, n, threads, move |i| read_one(&reads[i], to))
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

    fn read(path: PathBuf, offset: u64, size: usize, slot: usize) -> Read {
        Read {
            path,
            offset,
            size,
            slot,
        }
    }

    #[test]
    fn reads_land_in_their_slots() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let a = file("a", &data);
        let b = file("b", b"hello world");
        let mut buf = vec![0xA5u8; 200_000];
        let reads = vec![
            read(a.clone(), 0, data.len(), 0),
            read(b.clone(), 6, 5, 100_000),
            read(a, 1000, 64, 100_100),
            read(b, 0, 0, 100_200),
        ];
        let outs = run(&rt(), reads, Target(buf.as_mut_ptr() as usize), 3);
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
        let reads = vec![
            read(short.clone(), 0, 16, 0),
            read(dir().join("missing"), 0, 16, 16),
            read(d, 0, 16, 32),
            read(short.join("below-a-file"), 0, 16, 48),
        ];
        let outs = run(&rt(), reads, Target(buf.as_mut_ptr() as usize), 2);
        assert_eq!(
            outs[0],
            Outcome {
                got: 3,
                error: None
            }
        );
        assert_eq!(&buf[..3], b"abc");
        let kinds: Vec<_> = outs.iter().map(|o| o.error.as_ref().map(|e| e.0)).collect();
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
        assert!(outs[2].error.as_ref().unwrap().2.contains("sub"));
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
