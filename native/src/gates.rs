//! What waves and uploads share: the gates every request passes (the call's bound on requests in flight,
//! the store's on its connections across concurrent calls, then the store's ramp of requests waiting for an
//! answer), and the collection of one result per item from their tasks.

use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::ramp::{answer_of, Ramp, Ticket};
use crate::stop::{interrupted, Stop};
use crate::wave::Failure;

/// The call's own bound on requests in flight, then the store's (its sockets, idle or not, across concurrent
/// calls), then its ramp; a stopped call's requests wait no more.
#[derive(Clone)]
pub struct Gates {
    call: Arc<Semaphore>,
    conn: Arc<Semaphore>,
    ramp: Arc<Ramp>,
    stop: Stop,
}

/// Held while a request is in flight; `settle` tells the ramp how it went.
pub struct Permits {
    _call: OwnedSemaphorePermit,
    _conn: OwnedSemaphorePermit,
    ticket: Ticket,
}

impl Permits {
    pub fn settle<T>(self, r: &Result<T, Failure>) {
        self.ticket.settle(answer_of(r.as_ref().err()));
    }
}

impl Gates {
    pub fn new(concurrency: usize, built: &crate::store::Built, stop: Stop) -> Self {
        Gates {
            call: Arc::new(Semaphore::new(concurrency.max(1))),
            conn: built.gate.clone(),
            ramp: built.ramp.clone(),
            stop,
        }
    }

    pub fn stopped(&self) -> bool {
        self.stop.is_set()
    }

    /// `f`'s result, or `interrupted()` as soon as the call is stopped (`f` is dropped).
    pub async fn unless_stopped<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, Failure>>,
    ) -> Result<T, Failure> {
        tokio::select! {
            biased;
            _ = self.stop.wait() => Err(interrupted()),
            r = f => r,
        }
    }

    pub async fn enter(&self) -> Result<Permits, Failure> {
        tokio::select! {
            biased;
            _ = self.stop.wait() => Err(interrupted()),
            p = self.places() => p,
        }
    }

    async fn places(&self) -> Result<Permits, Failure> {
        let call = self.call.clone().acquire_owned();
        let call = call.await.map_err(|_| closed())?;
        let conn = connection(&self.conn).await?;
        let ticket = self.ramp.enter().await.ok_or_else(closed)?;
        Ok(Permits {
            _call: call,
            _conn: conn,
            ticket,
        })
    }
}

pub fn closed() -> Failure {
    ("panic", 0, "the core's request gate closed".to_string())
}

/// A permit of the store's gate on its connections (held while one request is in flight).
pub async fn connection(conn: &Arc<Semaphore>) -> Result<OwnedSemaphorePermit, Failure> {
    conn.clone().acquire_owned().await.map_err(|_| closed())
}

/// Each task's `(item, result)` in item order; an item whose task is missing (it panicked, or was never
/// started) gets `lost()`.
pub async fn collect<T: Send + 'static>(
    mut tasks: JoinSet<(usize, T)>,
    n: usize,
    lost: impl Fn() -> T,
) -> Vec<T> {
    let mut outs: Vec<Option<T>> = (0..n).map(|_| None).collect();
    while let Some(joined) = tasks.join_next().await {
        if let Ok((i, out)) = joined {
            outs[i] = Some(out);
        }
    }
    outs.into_iter().map(|o| o.unwrap_or_else(&lost)).collect()
}
