//! What waves and uploads share: the two gates every request passes (the call's bound on requests in
//! flight, then the store's on its connections, across concurrent calls), and the collection of one
//! result per item from their tasks.

use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::wave::Failure;

/// The call's own bound on requests in flight, then the store's (its sockets, idle or not, across concurrent
/// calls).
#[derive(Clone)]
pub struct Gates {
    call: Arc<Semaphore>,
    conn: Arc<Semaphore>,
}

/// Held while a request is in flight.
pub type Permits = (OwnedSemaphorePermit, OwnedSemaphorePermit);

impl Gates {
    pub fn new(concurrency: usize, conn: Arc<Semaphore>) -> Self {
        Gates {
            call: Arc::new(Semaphore::new(concurrency.max(1))),
            conn,
        }
    }

    pub async fn enter(&self) -> Result<Permits, Failure> {
        let call = self.call.clone().acquire_owned();
        let call = call.await.map_err(|_| closed())?;
        Ok((call, connection(&self.conn).await?))
    }
}

fn closed() -> Failure {
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
