//! zstd payloads of one buffer decoded into slots of another by the host's threads, the GIL released: a
//! window's chunks in one call, not one Python call (and its per-call overhead) each.

use std::sync::Mutex;

use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;

use crate::error::CallError;
use crate::slots::{counts_out, nonneg, Held, Slot, Source};

const WHO: &str = "zstd_decompress()";

/// One payload to decode: `len` bytes at `start` of the source into `dest` (at most its whole slot).
struct Job {
    item: usize,
    start: usize,
    len: usize,
    dest: Slot,
}

/// Each job's decoded size, or -1 where zstd refused it (not zstd, corrupt, or larger than its slot).
fn decode_all(from: Source, jobs: Vec<Job>, threads: usize) -> Vec<(usize, i64)> {
    let queue = Mutex::new(jobs.into_iter());
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    let Ok(mut dctx) = zstd::bulk::Decompressor::new() else {
                        return done; // no context (out of memory): the other workers take every job
                    };
                    loop {
                        let next = queue.lock().map(|mut q| q.next()).unwrap_or(None);
                        let Some(mut job) = next else { break };
                        let got = match from.slice(job.start, job.len) {
                            Some(src) => dctx
                                .decompress_to_buffer(src, job.dest.bytes_mut())
                                .map_or(-1, |n| n as i64),
                            None => -1,
                        };
                        done.push((job.item, got));
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    })
}

/// Decode zstd payloads (each one frame or several, concatenated) into slots of `dst`; see
/// `gdsstore/_core.pyi`.
#[pyfunction]
#[pyo3(signature = (src, dst, table, got, *, threads = 1))]
pub fn zstd_decompress(
    py: Python<'_>,
    src: &Bound<'_, PyAny>,
    dst: &Bound<'_, PyAny>,
    table: &Bound<'_, PyAny>,
    got: &Bound<'_, PyAny>,
    threads: usize,
) -> PyResult<()> {
    let cols = nonneg(WHO, "table entry", PyBuffer::<i64>::get(table)?.to_vec(py)?)?;
    if cols.len() % 4 != 0 {
        return Err(CallError::Args(format!(
            "{WHO}: `table` must hold 4 rows (source offsets, sizes, slot offsets, capacities)"
        ))
        .into());
    }
    let n = cols.len() / 4;
    let out = counts_out(WHO, "got", got, n)?;
    let from = Held::readable(WHO, "src", src)?;
    let into = Held::writable(WHO, "dst", dst)?;
    let (src_off, rest) = cols.split_at(n);
    let (src_len, rest) = rest.split_at(n);
    let (dst_off, dst_cap) = rest.split_at(n);
    for i in 0..n {
        if src_off[i]
            .checked_add(src_len[i])
            .is_none_or(|e| e > from.len())
        {
            return Err(CallError::Args(format!(
                "{WHO}: payload {i} ({}+{}) outside `src` of {} bytes",
                src_off[i],
                src_len[i],
                from.len()
            ))
            .into());
        }
    }
    let spans: Vec<(usize, usize)> = dst_off
        .iter()
        .copied()
        .zip(dst_cap.iter().copied())
        .collect();
    let jobs: Vec<Job> = into
        .slots(WHO, &spans)?
        .into_iter()
        .enumerate()
        .map(|(item, dest)| Job {
            item,
            start: src_off[item],
            len: src_len[item],
            dest,
        })
        .collect();
    let source = from.source();
    // `from` and `into` (and the memory they export) stay alive until every job is done.
    let done = py.allow_threads(|| decode_all(source, jobs, threads.min(n)));
    drop((from, into));
    let mut counts = vec![-1i64; n];
    for (item, g) in done {
        counts[item] = g;
    }
    out.copy_from_slice(py, &counts)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jobs(spans: &[(usize, usize)], dst: &mut [u8], slots: &[(usize, usize)]) -> Vec<Job> {
        Slot::over(dst, slots)
            .into_iter()
            .zip(spans)
            .enumerate()
            .map(|(item, (dest, &(start, len)))| Job {
                item,
                start,
                len,
                dest,
            })
            .collect()
    }

    #[test]
    fn decodes_frames_concatenated_frames_and_refuses_the_rest() {
        let a: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
        let b: Vec<u8> = (0..30_000u32).map(|i| (i % 13) as u8).collect();
        let fa = zstd::bulk::compress(&a, 1).unwrap();
        let fb = zstd::bulk::compress(&b, 3).unwrap();
        // payloads: a; a then b (two frames, one chunk); garbage; a into a slot too small for it
        let mut src = Vec::new();
        src.extend_from_slice(&fa);
        src.extend_from_slice(&fa);
        src.extend_from_slice(&fb);
        src.extend_from_slice(b"not zstd at all");
        let (la, lb) = (fa.len(), fb.len());
        let spans = [(0, la), (la, la + lb), (2 * la + lb, 15), (0, la)];
        let cap = [a.len(), a.len() + b.len(), 100, a.len() - 1];
        let mut slots = Vec::new();
        let mut at = 0;
        for c in cap {
            slots.push((at, c));
            at += c;
        }
        let mut dst = vec![0u8; at];
        let js = jobs(&spans, &mut dst, &slots);
        let mut done = decode_all(Source::over(&src), js, 3);
        done.sort_unstable();
        let got: Vec<i64> = done.into_iter().map(|(_, g)| g).collect();
        assert_eq!(
            got,
            vec![a.len() as i64, (a.len() + b.len()) as i64, -1, -1]
        );
        assert_eq!(&dst[..a.len()], &a[..]);
        let two = &dst[a.len()..a.len() * 2 + b.len()];
        assert_eq!(&two[..a.len()], &a[..]);
        assert_eq!(&two[a.len()..], &b[..]);
    }
}
