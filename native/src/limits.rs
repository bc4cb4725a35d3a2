//! The limits every request of a wave or an upload passes, in order: the call's bound on requests in
//! flight, the store's on its connections across concurrent calls, then the store's ramp of requests
//! waiting for an answer. Also a request's deadline, and the collection of one result per item from a
//! call's tasks.

use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::error::{Failure, Kind};
use crate::ramp::{Answer, Ramp, Ticket};
use crate::stop::Stop;
use crate::store::Built;

/// The limits of one call on one store; a stopped call's requests wait no more.
#[derive(Clone)]
pub struct Limits {
    call: Arc<Semaphore>,
    conn: Arc<Semaphore>,
    ramp: Arc<Ramp>,
    stop: Stop,
}

/// Held while a request is in flight; `settle` tells the ramp how it went.
pub struct InFlight {
    _call: OwnedSemaphorePermit,
    _conn: OwnedSemaphorePermit,
    ticket: Ticket,
}

impl InFlight {
    pub fn settle<T>(self, r: &Result<T, Failure>) {
        self.ticket.settle(Answer::of(r.as_ref().err()));
    }
}

impl Limits {
    pub fn new(concurrency: usize, built: &Built, stop: Stop) -> Self {
        Limits {
            call: Arc::new(Semaphore::new(concurrency.max(1))),
            conn: built.connections.clone(),
            ramp: built.ramp.clone(),
            stop,
        }
    }

    pub fn stopped(&self) -> bool {
        self.stop.is_set()
    }

    /// `f`'s result, or `Failure::interrupted()` as soon as the call is stopped (`f` is dropped).
    pub async fn unless_stopped<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, Failure>>,
    ) -> Result<T, Failure> {
        tokio::select! {
            biased;
            _ = self.stop.wait() => Err(Failure::interrupted()),
            r = f => r,
        }
    }

    /// One request: past every limit, within `limit`, given up on a stop; the ramp is told how it went.
    pub async fn request<T>(
        &self,
        limit: std::time::Duration,
        f: impl std::future::Future<Output = object_store::Result<T>>,
    ) -> Result<T, Failure> {
        let permits = self.enter().await?;
        let r = self.unless_stopped(timed(limit, f)).await;
        permits.settle(&r);
        r
    }

    /// Wait until a request may go, past every limit.
    pub async fn enter(&self) -> Result<InFlight, Failure> {
        tokio::select! {
            biased;
            _ = self.stop.wait() => Err(Failure::interrupted()),
            p = self.places() => p,
        }
    }

    async fn places(&self) -> Result<InFlight, Failure> {
        let call = self.call.clone().acquire_owned();
        let call = call.await.map_err(|_| closed())?;
        let conn = connection(&self.conn).await?;
        let ticket = self.ramp.enter().await.ok_or_else(closed)?;
        Ok(InFlight {
            _call: call,
            _conn: conn,
            ticket,
        })
    }
}

/// `f`'s answer, or a timeout failure once `limit` has passed without one.
pub async fn timed<T>(
    limit: std::time::Duration,
    f: impl std::future::Future<Output = object_store::Result<T>>,
) -> Result<T, Failure> {
    match tokio::time::timeout(limit, f).await {
        Err(_) => Err(Failure::new(
            Kind::Timeout,
            format!("no answer in {limit:?}"),
        )),
        Ok(Err(e)) => Err(Failure::from(&e)),
        Ok(Ok(v)) => Ok(v),
    }
}

pub fn closed() -> Failure {
    Failure::panic("the core's request limits closed")
}

/// A permit of the store's bound on its connections (held while one request is in flight).
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
