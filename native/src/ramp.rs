//! How many requests of one store wait for their answer at once: a few at first, more while the server
//! keeps up, fewer when it refuses or resets connections or stops answering.
//!
//! A request waiting for its answer may be a connection the server has not accepted yet. A small server
//! (python's `http.server`: a listen backlog of 5, one thread accepting) drops the SYNs beyond its backlog,
//! and the kernel sends them again after 1, 3, 7, 15, 31 s: a wave opening 256 connections at once took a
//! minute there. So the limit starts at `START` and is measured in rounds: a round takes the answers to
//! requests sent since it began, `limit` of them (at least `ROUND`), and the rate of answers the server keeps
//! at that limit: the limit over their mean time to answer (Little's law; a server that queues the extra
//! requests answers each later, one that keeps up as fast). A step up is kept where the rate gained at least
//! `GAIN` of what the step added in requests (20 % for a doubling, 5 % for a quarter more: a loaded server or
//! client that still answers more with more in flight keeps growing). Where it gained `SCALING` of it (most
//! of it: an object store, nginx, each answer as fast with more in flight) the next step doubles again, else steps add a
//! quarter; below `FEW` steps add one (a listen backlog of 5 overflows at 7 or 8 connects at once). A step
//! that gained less goes back (more would only fill the server's queues, and overflow a small backlog), and
//! the next is tried `PROBE` rounds later. A refused, reset or timed-out request halves the limit, once for
//! the requests sent together, and so does an answer that took `SLOW` (a SYN the server dropped is sent again
//! a second later); the limit at which answers came that late is not tried again for `STALLED_FOR`. A step's
//! new requests go out one more per answer, never as a burst of connects. Rounds in which no request waited
//! for the limit say nothing of the server and are not counted, and a store that goes idle (nothing in flight
//! for `IDLE`) comes back at the limit it kept where that is `FEW` or more and the idle was short
//! (`RESUME_WITHIN`), else from a quarter of it (`AFTER_IDLE`, at least `START`), doubling each round up to it
//! (a step not measured is not kept). Bodies are not counted: a request leaves the ramp when its answer's headers arrive.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::error::{Failure, Kind};

/// Requests waiting for an answer at first.
const START: usize = 2;
/// Below this many, steps add one: a listen backlog of 5 overflows at 7 or 8 connects at once, and each
/// step measured on the way may stop the ramp before it does.
const FEW: usize = 8;
/// Fewest answers a round measures.
const ROUND: usize = 8;
/// The share of a step's added requests the answer rate must gain for the step to be kept.
const GAIN: f64 = 0.2;
/// The share of a step's added requests the rate must gain for the next step to double (60 %: 1.6x for a
/// doubling, as an object store or nginx answers each as fast with more in flight).
const SCALING: f64 = 0.6;
/// An answer this late is a refusal in disguise: a SYN the server dropped, sent again a second later, or
/// a queue that long.
const SLOW: Duration = Duration::from_secs(1);
/// How long a limit at which answers came late is not tried again.
const STALLED_FOR: Duration = Duration::from_secs(30);
/// Rounds at one limit after a failed step before the next is tried.
const PROBE: u32 = 8;
/// A store back from a long idle starts at this fraction of the last limit it kept (at least `START`).
const AFTER_IDLE: usize = 4;
/// A store idle for less than this comes back at the limit it kept, where that is `FEW` or more: its pool still
/// holds the connections that limit used (reqwest keeps idle ones 90 s, nginx 75 s, Apache 5 s; one the
/// server closed is opened again, by a server that took that many at once), so no burst of connects
/// goes out to a small backlog, which would not have let the limit reach `FEW`.
const RESUME_WITHIN: Duration = Duration::from_secs(15);
/// A store with nothing in flight for this long is idle. Callers that send one request at a time (zarr's
/// own pipeline: one `get` per chunk from a few threads) leave none in flight between answers for far less.
const IDLE: Duration = Duration::from_secs(1);

/// The ramp of one store, shared by its waves and uploads.
pub struct Ramp {
    permits: Arc<Semaphore>,
    state: Mutex<State>,
    max: usize,
}

struct State {
    limit: usize,
    /// Permits to take out of use as they come back (the limit went down while they were out).
    debt: usize,
    /// Permits of a step up not yet given out: one is, with each answer.
    pending: usize,
    in_flight: usize,
    /// When the last request left the ramp.
    last_answer: Instant,
    /// The round: its number (a request counts in the round it was sent in) and its answers.
    round: u64,
    answers: usize,
    /// Seconds the round's own requests waited for their answers, summed.
    waited: f64,
    /// Some request of this round waited for a permit: the limit, not the caller, set the pace.
    limited: bool,
    /// Requests waiting for a permit now (a wave's queue outlasts the round its requests joined in).
    waiting: usize,
    /// The last limit that kept up, and its rate of answers (per second; 0: not measured).
    kept: usize,
    kept_rate: f64,
    /// Rounds to stay at `kept` before trying higher.
    wait: u32,
    /// Requests sent before this answer nothing new about the server when refused or late.
    backed_off: Instant,
    /// The limit at which answers came late, and when: steps stay below it for `STALLED_FOR`.
    ceiling: Option<(usize, Instant)>,
    /// Steps up double the limit while each doubling scaled the rate; then they add a quarter.
    doubling: bool,
}

/// How a request left the ramp.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Answer {
    /// Its answer's headers arrived (whatever the status).
    Answered,
    /// Refused, reset or timed out: the server is not keeping up.
    Refused,
    /// Stopped or cancelled before an answer: says nothing of the server.
    Gone,
}

impl Answer {
    /// How a request that ended with `failure` (None: answered) leaves the ramp.
    pub fn of(failure: Option<&Failure>) -> Answer {
        match failure.map(|f| f.kind) {
            None => Answer::Answered,
            Some(k) if k.is_refusal() => Answer::Refused,
            Some(Kind::Interrupted | Kind::Panic) => Answer::Gone,
            Some(_) => Answer::Answered,
        }
    }
}

/// A request's place in the ramp; given back by `settle` (or on drop, as `Gone`).
pub struct Ticket {
    ramp: Arc<Ramp>,
    permit: Option<OwnedSemaphorePermit>,
    round: u64,
    sent: Instant,
}

impl Ramp {
    pub fn new(max: usize) -> Arc<Self> {
        let max = max.max(1);
        let start = START.min(max);
        Arc::new(Ramp {
            permits: Arc::new(Semaphore::new(start)),
            state: Mutex::new(State {
                limit: start,
                debt: 0,
                pending: 0,
                in_flight: 0,
                last_answer: Instant::now(),
                backed_off: Instant::now(),
                ceiling: None,
                round: 0,
                answers: 0,
                waited: 0.0,
                limited: false,
                waiting: 0,
                kept: start,
                kept_rate: 0.0,
                wait: 0,
                doubling: true,
            }),
            max,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait for a place; `None` only if the ramp's semaphore was closed (never).
    pub async fn enter(self: &Arc<Self>) -> Option<Ticket> {
        {
            let mut s = self.lock();
            let idle = s.last_answer.elapsed();
            if s.in_flight == 0 && idle >= IDLE {
                // Idle until now. After a short idle a limit of `FEW` or more comes back whole (`RESUME_WITHIN`:
                // a reader with gaps between its reads, dask tasks, xarray variables, paid a ramp per read). After
                // a long one the server may have closed every connection, and a burst of new ones is what
                // overflows a small backlog: back to a quarter of what kept up (a few for a small server,
                // enough for an object store to answer at speed), doubling each round up to it (as TCP
                // restarts its window after idle); a step not measured is not kept.
                let back = if s.kept >= FEW && idle < RESUME_WITHIN {
                    s.kept
                } else {
                    (s.kept / AFTER_IDLE).max(START)
                };
                self.set_limit(&mut s, back);
                Self::restart(&mut s);
            }
        }
        let permit = match self.permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                let _waiting = Waiting::new(self);
                self.permits.clone().acquire_owned().await.ok()?
            }
        };
        let mut s = self.lock();
        s.in_flight += 1;
        let round = s.round;
        drop(s);
        Some(Ticket {
            ramp: self.clone(),
            permit: Some(permit),
            round,
            sent: Instant::now(),
        })
    }

    #[cfg(test)]
    fn limit(&self) -> usize {
        self.lock().limit
    }

    fn set_limit(&self, s: &mut State, to: usize) {
        let to = to.clamp(1, self.max);
        if to > s.limit {
            let mut more = to - s.limit;
            let paid = more.min(s.debt);
            s.debt -= paid;
            more -= paid;
            s.pending += more;
        } else {
            let mut less = s.limit - to;
            let unreleased = less.min(s.pending);
            s.pending -= unreleased;
            less -= unreleased;
            s.debt += less;
            let freed = self.permits.forget_permits(s.debt);
            s.debt -= freed;
        }
        s.limit = to;
    }

    fn restart(s: &mut State) {
        s.round += 1;
        s.answers = 0;
        s.waited = 0.0;
        s.limited = s.waiting > 0;
    }

    fn settle(&self, permit: OwnedSemaphorePermit, (round, sent): (u64, Instant), how: Answer) {
        let mut s = self.lock();
        s.in_flight = s.in_flight.saturating_sub(1);
        s.last_answer = Instant::now();
        if s.debt > 0 {
            s.debt -= 1;
            permit.forget();
        } else {
            drop(permit);
        }
        if s.pending > 0 {
            // One more request per answer: a step up sends its new connections as answers come back,
            // never all at once (a burst of connects is what overflows a small server's backlog).
            s.pending -= 1;
            self.permits.add_permits(1);
            if s.pending == 0 {
                Self::restart(&mut s); // the step is measured from here, all its requests out
            }
        }
        match how {
            Answer::Gone => {}
            // Once for the requests sent together: the others met the same queue or backlog.
            Answer::Refused if sent >= s.backed_off => self.back_off(&mut s, false),
            Answer::Answered if sent >= s.backed_off && sent.elapsed() >= SLOW => {
                self.back_off(&mut s, true)
            }
            Answer::Refused => {}
            Answer::Answered if round == s.round => {
                s.answers += 1;
                s.waited += sent.elapsed().as_secs_f64();
                if s.answers >= s.limit.max(ROUND) {
                    self.round_over(&mut s);
                }
            }
            Answer::Answered => {} // sent in an earlier round, under another limit
        }
    }

    /// The server is not keeping up: half the limit, measured afresh before the next step; where it
    /// `stalled` (answered late), the limit it stalled at is not tried again for `STALLED_FOR`.
    fn back_off(&self, s: &mut State, stalled: bool) {
        if stalled {
            s.ceiling = Some((s.limit, Instant::now()));
        }
        let half = (s.limit / 2).max(START);
        self.set_limit(s, half);
        s.kept = s.limit;
        s.kept_rate = 0.0;
        s.wait = 1;
        s.doubling = false;
        s.backed_off = Instant::now();
        Self::restart(s);
    }

    fn round_over(&self, s: &mut State) {
        if s.limit < s.kept {
            // Coming back from idle: what kept up before is not measured again on the way.
            let up = (s.limit * 2).min(s.kept);
            Self::restart(s);
            self.set_limit(s, up);
            return;
        }
        // Little's law: the limit over the mean time to an answer (each request's own time, exact however
        // short the round; its requests were all sent under this limit, see `pending`).
        let rate = s.limit as f64 / (s.waited / s.answers.max(1) as f64).max(1e-9);
        let limited = s.limited;
        Self::restart(s);
        if !limited {
            return; // the callers set the pace: nothing learned of the server
        }
        if s.limit > s.kept {
            let rise = rate / s.kept_rate.max(1e-9);
            let step = s.limit as f64 / s.kept.max(1) as f64;
            if rise < 1.0 + GAIN * (step - 1.0) {
                // No faster with more waiting: back to what kept up, held there a while.
                s.doubling = false;
                s.wait = PROBE;
                let back = s.kept;
                self.set_limit(s, back);
                return;
            }
            // Twice the requests, much less than twice the answers: close to what the server can take.
            if step >= 2.0 {
                // Only a doubling says whether the next may double (a small step's gain is within noise).
                s.doubling = s.doubling && rise >= 1.0 + SCALING * (step - 1.0);
            }
        }
        // At the limit that kept up (its rate now), or a step up that answered faster: keep it.
        s.kept = s.limit;
        s.kept_rate = rate;
        if s.wait > 0 {
            s.wait -= 1;
        } else {
            let up = if s.limit < FEW {
                s.limit + 1
            } else if s.doubling {
                s.limit * 2
            } else {
                s.limit + (s.limit / 4).max(1)
            };
            let below = match s.ceiling {
                Some((at, since)) if since.elapsed() < STALLED_FOR => at - 1,
                _ => self.max,
            };
            if s.limit < below {
                self.set_limit(s, up.min(below));
            }
        }
    }
}

/// A request waiting for a permit, counted while it waits (also when its caller gives up).
struct Waiting<'a>(&'a Ramp);

impl<'a> Waiting<'a> {
    fn new(ramp: &'a Ramp) -> Self {
        let mut s = ramp.lock();
        s.waiting += 1;
        s.limited = true;
        Waiting(ramp)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        s.waiting = s.waiting.saturating_sub(1);
    }
}

impl Ticket {
    /// Leave the ramp, saying how.
    pub fn settle(mut self, how: Answer) {
        if let Some(p) = self.permit.take() {
            self.ramp.settle(p, (self.round, self.sent), how);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(p) = self.permit.take() {
            self.ramp.settle(p, (self.round, self.sent), Answer::Gone);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap()
    }

    /// How long a server takes to answer with `n` requests in flight.
    #[derive(Clone, Copy, Debug)]
    enum Server {
        /// The same time however many wait (an object store far from its limit).
        Paced,
        /// In line: each answer waits for those before it (the rate does not grow with more in flight).
        Queueing,
        /// A fixed time plus a share per request in flight: the rate still grows, ever less (a loaded
        /// client or server; up to 1/share).
        Loaded,
        /// As `Paced` for the first half of the requests; then more than 8 at once wait a second each
        /// (a small server's backlog overflowing: its SYNs dropped).
        Shrinking,
        /// As `Paced`, but more than 6 at once wait a second each, from the start (python's
        /// `http.server`: a listen backlog of 5).
        Backlog,
    }

    /// `n` requests through the ramp, `wanted` at once, answered as `server` does; the peak in flight, and
    /// the answers that took a second.
    fn drive(ramp: &Arc<Ramp>, n: usize, wanted: usize, server: Server) -> (usize, usize) {
        let rt = rt();
        let peak = Arc::new(Mutex::new((0usize, 0usize, 0usize)));
        rt.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            let sem = Arc::new(Semaphore::new(wanted));
            for i in 0..n {
                let p = sem.clone().acquire_owned().await.unwrap();
                let ramp = ramp.clone();
                let peak = peak.clone();
                set.spawn(async move {
                    let t = ramp.enter().await.unwrap();
                    let now = {
                        let mut pk = peak.lock().unwrap();
                        pk.0 += 1;
                        pk.1 = pk.1.max(pk.0);
                        pk.0
                    };
                    let us = match server {
                        Server::Paced => 5_000,
                        Server::Queueing => 1_000 * now as u64,
                        Server::Loaded => 20_000 + 200 * now as u64,
                        Server::Shrinking if i > n / 2 && now > 8 => 1_000_000,
                        Server::Shrinking => 5_000,
                        Server::Backlog if now > 6 => 1_000_000,
                        Server::Backlog => 5_000,
                    };
                    if us >= 1_000_000 {
                        peak.lock().unwrap().2 += 1;
                    }
                    tokio::time::sleep(std::time::Duration::from_micros(us)).await;
                    peak.lock().unwrap().0 -= 1;
                    t.settle(Answer::Answered);
                    drop(p);
                });
            }
            while set.join_next().await.is_some() {}
        });
        let pk = *peak.lock().unwrap();
        (pk.1, pk.2)
    }

    #[test]
    fn the_peak_in_flight_follows_the_server() {
        // (server, requests, fewest and most at once): hundreds where answers keep their time; few where
        // they wait in line; where a loaded server answers half its most at 100, the ramp goes past it.
        let cases = [
            (Server::Paced, 600, 128, 256),
            (Server::Queueing, 300, 1, 8),
            (Server::Loaded, 6000, 200, 256),
        ];
        for (server, n, least, most) in cases {
            let peak = drive(&Ramp::new(256), n, 256, server).0;
            assert!((least..=most).contains(&peak), "{server:?}: peak {peak}");
        }
    }

    #[test]
    fn grows_under_bursts_that_each_drain() {
        // Bursts of 64 (a window of chunks), each answered in full before the next is sent: nothing in
        // flight between them, for far less than `IDLE`. The limit grows to half a burst or more.
        let ramp = Ramp::new(256);
        let rt = rt();
        rt.block_on(async {
            for _ in 0..100 {
                let mut set = tokio::task::JoinSet::new();
                for _ in 0..64 {
                    let ramp = ramp.clone();
                    set.spawn(async move {
                        let t = ramp.enter().await.unwrap();
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        t.settle(Answer::Answered);
                    });
                }
                while set.join_next().await.is_some() {}
            }
        });
        assert!(ramp.limit() >= 32, "limit {}", ramp.limit());
    }

    #[test]
    fn a_server_that_stalls_at_the_kept_limit_gets_fewer() {
        let ramp = Ramp::new(256);
        let peak = drive(&ramp, 4000, 256, Server::Shrinking).0;
        assert!(peak >= 128, "peak {peak}");
        assert!(ramp.limit() <= 16, "limit {}", ramp.limit());
    }

    #[test]
    fn comes_back_at_the_kept_limit_after_a_short_idle_and_from_a_quarter_after_a_long_one() {
        let ramp = Ramp::new(256);
        assert!(drive(&ramp, 2000, 256, Server::Paced).0 >= 128);
        let kept = ramp.lock().kept;
        assert!(kept >= 128, "kept {kept}");
        let rt = rt();
        rt.block_on(async {
            tokio::time::sleep(IDLE * 2).await;
            ramp.enter().await.unwrap().settle(Answer::Gone);
        });
        assert_eq!(ramp.limit(), kept);
        let long_ago = Instant::now().checked_sub(RESUME_WITHIN * 2).unwrap();
        ramp.lock().last_answer = long_ago;
        rt.block_on(async { ramp.enter().await.unwrap().settle(Answer::Gone) });
        assert_eq!(ramp.limit(), kept / AFTER_IDLE);
        assert!(drive(&ramp, 2000, 256, Server::Paced).0 >= 128);
    }

    #[test]
    fn a_small_server_comes_back_from_start_after_idle() {
        let ramp = Ramp::new(256);
        ramp.lock().kept = 6; // what a listen backlog of 5 kept up with
        rt().block_on(async {
            tokio::time::sleep(IDLE * 2).await;
            ramp.enter().await.unwrap().settle(Answer::Gone);
        });
        assert_eq!(ramp.limit(), START);
    }

    #[test]
    fn a_small_backlog_costs_one_late_burst() {
        // The steps below `FEW` add one, so the first limit past the backlog is 7: the answers sent into
        // it in the second before the first comes back are late, once; then the limit stays below it.
        let ramp = Ramp::new(256);
        let (peak, slow) = drive(&ramp, 6000, 256, Server::Backlog);
        assert!(peak <= 8, "peak {peak}");
        assert!(slow <= 24, "{slow} answers a second late");
        assert!(ramp.limit() <= 6, "limit {}", ramp.limit());
    }

    #[test]
    fn refusals_halve_the_limit() {
        let ramp = Ramp::new(256);
        let rt = rt();
        {
            let mut s = ramp.lock();
            ramp.set_limit(&mut s, 64);
            s.kept = 64;
        }
        let t = rt.block_on(ramp.enter()).unwrap();
        t.settle(Answer::Refused);
        assert_eq!(ramp.limit(), 32);
        // what is given out now and what the next answers give out add up to the limit
        assert_eq!(ramp.permits.available_permits() + ramp.lock().pending, 32);
    }
}
