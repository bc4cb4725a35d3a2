//! Stores built from plain options: HTTP(S) over a base URL, S3 over a bucket. A store remembers how it was
//! built and builds itself again in a forked child (the parent's connections belong to the parent's runtime).

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::http::HttpBuilder;
use object_store::list::PaginatedListStore;
use object_store::{Certificate, ClientConfigKey, ClientOptions, ObjectStore, RetryConfig};
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

/// How the store's HTTP client is made: what the caller's options ask beside the timeouts.
#[derive(Clone)]
struct Client {
    connect_timeout: f64,
    pool_idle: usize,
    /// Headers sent with every request (values may be secrets: never in a message).
    headers: Vec<(String, String)>,
    /// object_store's client options by name (`allow_invalid_certificates`, `proxy_url`, ...).
    options: Vec<(String, String)>,
    /// PEM certificates trusted beside the system's (a CA bundle's contents).
    ca_pem: Option<Vec<u8>>,
}

impl Client {
    /// Checked once, where the store is asked for: a bad name or file fails `Store.http`/`Store.s3`.
    fn new(
        connect_timeout: f64,
        pool_idle: usize,
        headers: Vec<(String, String)>,
        options: Vec<(String, String)>,
        ca_bundle: Option<String>,
    ) -> Result<Self, String> {
        for (k, _) in &options {
            ClientConfigKey::from_str(k).map_err(|_| format!("unknown client option {k:?}"))?;
        }
        for (k, v) in &headers {
            http::HeaderName::from_str(k).map_err(|_| format!("bad header name {k:?}"))?;
            http::HeaderValue::from_str(v).map_err(|_| format!("bad value of header {k:?}"))?;
        }
        let ca_pem = match ca_bundle {
            None => None,
            Some(path) => {
                let pem = std::fs::read(&path).map_err(|e| format!("CA bundle {path:?}: {e}"))?;
                Certificate::from_pem_bundle(&pem)
                    .map_err(|e| format!("CA bundle {path:?} is not PEM certificates: {e}"))?;
                Some(pem)
            }
        };
        Ok(Client {
            connect_timeout,
            pool_idle,
            headers,
            options,
            ca_pem,
        })
    }
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
    /// The same store's listing by any prefix, page by page (S3; None: the store cannot list).
    pub lister: Option<Arc<dyn PaginatedListStore>>,
}

#[cfg(test)]
impl Built {
    /// An in-memory store with 4 connections: the crate's tests of what runs on a store.
    pub fn in_memory() -> Built {
        Built {
            store: Arc::new(object_store::memory::InMemory::new()),
            connections: Arc::new(tokio::sync::Semaphore::new(4)),
            ramp: Ramp::new(4),
            lister: None,
        }
    }
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
    for (k, v) in &c.options {
        if let Ok(key) = ClientConfigKey::from_str(k) {
            o = o.with_config(key, v.clone());
        }
    }
    if !c.headers.is_empty() {
        let mut map = http::HeaderMap::new();
        for (k, v) in &c.headers {
            if let (Ok(name), Ok(mut value)) = (
                http::HeaderName::from_str(k),
                http::HeaderValue::from_str(v),
            ) {
                value.set_sensitive(true); // kept out of debug output
                map.insert(name, value);
            }
        }
        o = o.with_default_headers(map);
    }
    if let Some(pem) = &c.ca_pem {
        for cert in Certificate::from_pem_bundle(pem).unwrap_or_default() {
            o = o.with_root_certificate(cert);
        }
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

/// The store, and its listing where it has one by any prefix (one S3 client serves both).
type Stores = (Arc<dyn ObjectStore>, Option<Arc<dyn PaginatedListStore>>);

fn build(spec: &Spec, client: &Client) -> Result<Stores, String> {
    match spec {
        Spec::Http { base } => HttpBuilder::new()
            .with_url(base.clone())
            .with_client_options(client_options(client))
            .with_retry(no_retries())
            .build()
            .map(|s| (Arc::new(s) as Arc<dyn ObjectStore>, None))
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
            let s3 = b
                .with_client_options(client_options(client))
                .with_retry(no_retries())
                .build()
                .map_err(|e| scrub(&e.to_string()))?;
            let s3 = Arc::new(s3);
            Ok((s3.clone(), Some(s3)))
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
        let (store, lister) = build(&self.spec, &self.client)?;
        Ok(Built {
            store,
            lister,
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
    /// `headers` go with every request; `options` are object_store's client options by name
    /// (`allow_invalid_certificates`, `proxy_url`, ...); `ca_bundle` is a PEM file trusted beside the
    /// system's certificates. Proxies also come from `HTTP(S)_PROXY`/`ALL_PROXY`/`NO_PROXY`.
    #[staticmethod]
    #[pyo3(signature = (base, *, connect_timeout = 10.0, pool_idle = 256, headers = Vec::new(),
                        options = Vec::new(), ca_bundle = None))]
    fn http(
        base: String,
        connect_timeout: f64,
        pool_idle: usize,
        headers: Vec<(String, String)>,
        options: Vec<(String, String)>,
        ca_bundle: Option<String>,
    ) -> PyResult<Self> {
        let client = Client::new(connect_timeout, pool_idle, headers, options, ca_bundle)
            .map_err(|e| CallError::Args(format!("Store.http(): {e}")))?;
        Self::new_checked(Spec::Http { base }, client)
    }

    /// A store of one S3 bucket. `options` are object_store's `AmazonS3ConfigKey` names
    /// (`aws_endpoint`, `aws_region`, `aws_access_key_id`, ...); `from_env` adds the `AWS_*` environment.
    #[staticmethod]
    #[pyo3(signature = (options, *, from_env = false, connect_timeout = 10.0, pool_idle = 256,
                        headers = Vec::new(), ca_bundle = None))]
    fn s3(
        options: Vec<(String, String)>,
        from_env: bool,
        connect_timeout: f64,
        pool_idle: usize,
        headers: Vec<(String, String)>,
        ca_bundle: Option<String>,
    ) -> PyResult<Self> {
        for (k, _) in &options {
            if AmazonS3ConfigKey::from_str(k).is_err() {
                return Err(CallError::Args(format!("Store.s3(): unknown option {k:?}")).into());
            }
        }
        let client = Client::new(connect_timeout, pool_idle, headers, Vec::new(), ca_bundle)
            .map_err(|e| CallError::Args(format!("Store.s3(): {e}")))?;
        Self::new_checked(Spec::S3 { options, from_env }, client)
    }

    fn __repr__(&self) -> String {
        match &self.spec {
            Spec::Http { base } => format!("Store.http({base:?})"),
            Spec::S3 { .. } => "Store.s3(...)".to_string(),
        }
    }
}
