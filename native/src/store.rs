//! Stores built from plain options: HTTP(S) over a base URL, S3 over a bucket. A store remembers how it was
//! built and builds itself again in a forked child (the parent's connections belong to the parent's runtime).

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::http::HttpBuilder;
use object_store::{ClientOptions, ObjectStore, RetryConfig};
use pyo3::prelude::*;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{scrub, CallError};
use crate::ramp::Ramp;

#[derive(Clone)]
enum Spec {
    Http {
        base: String,
    },
    S3 {
        options: Vec<(String, String)>,
        from_env: bool,
    },
}

#[derive(Clone)]
struct Client {
    connect_timeout: f64,
    pool_idle: usize,
}

/// A remote store; `Store.http(...)` or `Store.s3(...)`.
#[pyclass(module = "gdsstore._core", frozen)]
pub struct Store {
    spec: Spec,
    client: Client,
    built: Mutex<Option<(u32, Built)>>,
}

/// A store of this process and the bound on its connections: at most `pool_idle` requests in flight on it,
/// whatever the number of concurrent waves, so its sockets stay bounded.
#[derive(Clone)]
pub struct Built {
    pub store: Arc<dyn ObjectStore>,
    /// At most `pool_idle` requests in flight on the store, across calls.
    pub connections: Arc<tokio::sync::Semaphore>,
    /// How many of its requests wait for an answer at once (`ramp`): shared by every call on the store.
    pub ramp: Arc<Ramp>,
}

fn client_options(c: &Client) -> ClientOptions {
    let mut o = ClientOptions::new()
        .with_allow_http(true)
        .with_http1_only()
        // Timeouts of reads are the wave's own (per answer and per body chunk), not one total per request.
        .with_timeout_disabled()
        .with_pool_max_idle_per_host(c.pool_idle);
    if c.connect_timeout > 0.0 {
        o = o.with_connect_timeout(Duration::from_secs_f64(c.connect_timeout));
    }
    o
}

/// One retry policy holds: Python's. object_store's own retries are off.
fn no_retries() -> RetryConfig {
    RetryConfig {
        max_retries: 0,
        retry_timeout: Duration::ZERO,
        ..Default::default()
    }
}

fn build(spec: &Spec, client: &Client) -> Result<Arc<dyn ObjectStore>, String> {
    match spec {
        Spec::Http { base } => HttpBuilder::new()
            .with_url(base.clone())
            .with_client_options(client_options(client))
            .with_retry(no_retries())
            .build()
            .map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
            .map_err(|e| e.to_string()),
        Spec::S3 { options, from_env } => {
            let mut b = if *from_env {
                AmazonS3Builder::from_env()
            } else {
                AmazonS3Builder::new()
            };
            for (k, v) in options {
                // Keys are checked in `Store.s3`; values may be secrets and never enter a message.
                if let Ok(key) = AmazonS3ConfigKey::from_str(k) {
                    b = b.with_config(key, v.clone());
                }
            }
            b.with_client_options(client_options(client))
                .with_retry(no_retries())
                .build()
                .map(|s| Arc::new(s) as Arc<dyn ObjectStore>)
                .map_err(|e| scrub(&e.to_string()))
        }
    }
}

impl Store {
    /// The store of this process, built again after a fork.
    pub fn get(&self) -> Result<Built, CallError> {
        self.built_here().map_err(CallError::Internal)
    }

    fn built_here(&self) -> Result<Built, String> {
        let pid = std::process::id();
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((p, s)) = built.as_ref() {
            if *p == pid {
                return Ok(s.clone());
            }
        }
        let s = self.fresh()?;
        if let Some(old) = built.replace((pid, s.clone())) {
            // The parent's pool holds tasks of a runtime that is gone in this process: never dropped.
            std::mem::forget(old);
        }
        Ok(s)
    }

    fn fresh(&self) -> Result<Built, String> {
        Ok(Built {
            store: build(&self.spec, &self.client)?,
            connections: Arc::new(tokio::sync::Semaphore::new(self.client.pool_idle.max(1))),
            ramp: Ramp::new(self.client.pool_idle),
        })
    }

    fn new_checked(spec: Spec, client: Client) -> PyResult<Self> {
        let store = Store {
            spec,
            client,
            built: Mutex::new(None),
        };
        let s = store.fresh().map_err(CallError::Args)?;
        *store.built.lock().unwrap_or_else(|e| e.into_inner()) = Some((std::process::id(), s));
        Ok(store)
    }
}

#[pymethods]
impl Store {
    /// A store of the objects under `base` (`http(s)://host[:port]/`); paths are relative to it.
    #[staticmethod]
    #[pyo3(signature = (base, *, connect_timeout = 10.0, pool_idle = 256))]
    fn http(base: String, connect_timeout: f64, pool_idle: usize) -> PyResult<Self> {
        Self::new_checked(
            Spec::Http { base },
            Client {
                connect_timeout,
                pool_idle,
            },
        )
    }

    /// A store of one S3 bucket. `options` are object_store's `AmazonS3ConfigKey` names
    /// (`aws_endpoint`, `aws_region`, `aws_access_key_id`, ...); `from_env` adds the `AWS_*` environment.
    #[staticmethod]
    #[pyo3(signature = (options, *, from_env = false, connect_timeout = 10.0, pool_idle = 256))]
    fn s3(
        options: Vec<(String, String)>,
        from_env: bool,
        connect_timeout: f64,
        pool_idle: usize,
    ) -> PyResult<Self> {
        for (k, _) in &options {
            if AmazonS3ConfigKey::from_str(k).is_err() {
                return Err(CallError::Args(format!("Store.s3(): unknown option {k:?}")).into());
            }
        }
        Self::new_checked(
            Spec::S3 { options, from_env },
            Client {
                connect_timeout,
                pool_idle,
            },
        )
    }

    fn __repr__(&self) -> String {
        match &self.spec {
            Spec::Http { base } => format!("Store.http({base:?})"),
            Spec::S3 { .. } => "Store.s3(...)".to_string(),
        }
    }
}
