//! How many requests of one store wait for their answer at once: a few at first, more while the server
//! keeps up, fewer when it refuses or resets connections or stops answering.
//!
//! A request waiting for its answer may be a connection the server has not accepted yet. A small server
//! (python's `http.server`: a listen backlog of 5, one thread accepting) drops the SYNs beyond its backlog,
//! and the kernel sends them again after 1, 3, 7, 15, 31 s: a wave opening 256 connections at once took a
//! minute there. So the limit starts at `START` and is measured in rounds: a round takes the answers to
//! requests sent since it began, `limit` of them (at least `ROUND`), and the rate of answers the server
//! keeps at that limit: the limit over their mean time to answer (Little's law; a server that queues the
//! extra requests answers each later, one that keeps up as fast). A step up is kept
//! where it raised the rate by `GROWTH`; where it raised it by `SCALING` (as much again for twice the
//! requests: an object store, nginx, each answer as fast with more in flight) the next step doubles again,
//! else steps add a quarter. A step that did not raise the rate goes back (the server answers no faster with
//! more waiting: more would only fill its queues, and overflow a small backlog), and the next is tried
//! `PROBE` rounds later. A refused, reset or timed-out request halves the limit. Rounds in which fewer
//! requests wanted to go than the limit allows say nothing of the server and are not counted, and a step
//! not measured when the store goes idle is not kept. Bodies are not counted: a request leaves the ramp
//! when its answer's headers arrive.

use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{Failure, Kind};

/// Requests waiting for an answer at first.
const START: usize = 2;
/// Fewest answers a round measures.
const ROUND: usize = 8;
/// The rise of the answer rate that keeps a step up.
const GROWTH: f64 = 1.2;
/// The rise of the answer rate for twice the requests after which the limit doubles again.
const SCALING: f64 = 1.6;
/// Rounds at one limit after a failed step before the next is tried.
const PROBE: u32 = 8;

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
    in_flight: usize,
    /// The round: its number (a request counts in the round it was sent in), start and answers.
    round: u64,
    answers: usize,
    /// Seconds the round's answers took, summed.
    waited: f64,
    /// Some request of this round waited for a permit: the limit, not the caller, set the pace.
    limited: bool,
    /// The last limit that kept up, and its rate of answers (per second; 0: not measured).
    kept: usize,
    kept_rate: f64,
    /// Rounds to stay at `kept` before trying higher.
    wait: u32,
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
                in_flight: 0,
                round: 0,
                answers: 0,
                waited: 0.0,
                limited: false,
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
            if s.in_flight == 0 {
                // Idle until now: a step not measured is not kept, and a round starts here, not across the pause.
                if s.limit > s.kept {
                    let back = s.kept;
                    self.set_limit(&mut s, back);
                }
                Self::restart(&mut s);
            }
        }
        let permit = match self.permits.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                self.lock().limited = true;
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
            self.permits.add_permits(more);
        } else {
            s.debt += s.limit - to;
            let freed = self.permits.forget_permits(s.debt);
            s.debt -= freed;
        }
        s.limit = to;
    }

    fn restart(s: &mut State) {
        s.round += 1;
        s.answers = 0;
        s.waited = 0.0;
        s.limited = false;
    }

    fn settle(&self, permit: OwnedSemaphorePermit, round: u64, sent: Instant, how: Answer) {
        let mut s = self.lock();
        s.in_flight = s.in_flight.saturating_sub(1);
        if s.debt > 0 {
            s.debt -= 1;
            permit.forget();
        } else {
            drop(permit);
        }
        match how {
            Answer::Gone => {}
            Answer::Refused => {
                let half = (s.limit / 2).max(START);
                self.set_limit(&mut s, half);
                s.kept = s.limit;
                s.kept_rate = 0.0;
                s.wait = 1;
                s.doubling = false;
                Self::restart(&mut s);
            }
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

    fn round_over(&self, s: &mut State) {
        let mean = (s.waited / s.answers.max(1) as f64).max(1e-6);
        let rate = s.limit as f64 / mean;
        let limited = s.limited;
        Self::restart(s);
        if !limited {
            return; // the callers set the pace: nothing learned of the server
        }
        if s.limit > s.kept {
            let rise = rate / s.kept_rate.max(1e-9);
            if rise < GROWTH {
                // No faster with more waiting: back to what kept up, held there a while.
                s.doubling = false;
                s.wait = PROBE;
                let back = s.kept;
                self.set_limit(s, back);
                return;
            }
            // Twice the requests, much less than twice the answers: close to what the server can take.
            s.doubling = s.doubling && rise >= SCALING;
        }
        // At the limit that kept up (its rate now), or a step up that answered faster: keep it.
        s.kept = s.limit;
        s.kept_rate = rate;
        if s.wait > 0 {
            s.wait -= 1;
        } else if s.limit < self.max {
            let up = if s.doubling {
                s.limit * 2
            } else {
                s.limit + (s.limit / 4).max(1)
            };
            self.set_limit(s, up);
        }
    }
}

impl Ticket {
    /// Leave the ramp, saying how.
    pub fn settle(mut self, how: Answer) {
        if let Some(p) = self.permit.take() {
            self.ramp.settle(p, self.round, self.sent, how);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(p) = self.permit.take() {
            self.ramp.settle(p, self.round, self.sent, Answer::Gone);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// `n` requests through the ramp, `wanted` at once, each answered after `answer` (the server's time,
    /// which grows with the requests waiting where `queueing`).
    fn drive(ramp: &Arc<Ramp>, n: usize, wanted: usize, queueing: bool) -> usize {
        let rt = rt();
        let peak = Arc::new(Mutex::new((0usize, 0usize)));
        rt.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            let sem = Arc::new(Semaphore::new(wanted));
            for _ in 0..n {
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
                    let ms = if queueing { now as u64 } else { 5 };
                    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                    peak.lock().unwrap().0 -= 1;
                    t.settle(Answer::Answered);
                    drop(p);
                });
            }
            while set.join_next().await.is_some() {}
        });
        let pk = peak.lock().unwrap().1;
        pk
    }

    #[test]
    fn grows_while_answers_keep_their_time() {
        let ramp = Ramp::new(256);
        let peak = drive(&ramp, 1200, 256, false);
        assert!(peak >= 128, "peak {peak}");
    }

    #[test]
    fn stays_low_where_answers_wait_in_line() {
        let ramp = Ramp::new(256);
        let peak = drive(&ramp, 300, 256, true);
        assert!(peak <= 8, "peak {peak}");
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
        assert_eq!(ramp.permits.available_permits(), 32);
    }
}
