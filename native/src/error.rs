//! The core's errors, in one place. Each item that fails comes back with a `Failure`: a `Kind` (its name
//! crosses to Python as a string, `Kind::name`, mapped to gdsstore's exceptions by
//! `gdsstore.engine.remote.core._error`, and for local reads by `gdsstore.engine.batch._raise_core_errors`),
//! an HTTP status or an errno, and a message. A call that cannot start raises a `CallError`, mapped once to Python
//! exceptions (`From<CallError> for PyErr`).

use object_store::client::{HttpError, HttpErrorKind};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::PyErr;

/// Why one item failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    NotFound,
    Permission,
    IsDirectory,
    /// The object is not the version asked (`If-Match`, 412) or changed between answers.
    Changed,
    /// A create-only write found the object there.
    Exists,
    /// Any other HTTP status (the status says which).
    Status,
    /// The answer is not the range asked (`Content-Range`).
    Range,
    /// A ranged request answered with the whole object (200).
    RangeIgnored,
    Length,
    Short,
    Encoding,
    TooLarge,
    Timeout,
    Connect,
    /// The server closed a kept-alive connection as the request went out on it, before any answer: a race
    /// every HTTP client meets on reused connections, worth another request at once (the server is not
    /// refusing).
    Stale,
    Io,
    Tls,
    /// object_store cannot take the item: the caller reads or writes it another way.
    Unsupported,
    Invalid,
    Interrupted,
    Panic,
}

impl Kind {
    /// The name Python reads (`gdsstore/_core.pyi` lists them).
    pub fn name(self) -> &'static str {
        match self {
            Kind::NotFound => "not_found",
            Kind::Permission => "permission",
            Kind::IsDirectory => "is_directory",
            Kind::Changed => "changed",
            Kind::Exists => "exists",
            Kind::Status => "status",
            Kind::Range => "range",
            Kind::RangeIgnored => "range_ignored",
            Kind::Length => "length",
            Kind::Short => "short",
            Kind::Encoding => "encoding",
            Kind::TooLarge => "too_large",
            Kind::Timeout => "timeout",
            Kind::Connect => "connect",
            Kind::Stale => "stale",
            Kind::Io => "io",
            Kind::Tls => "tls",
            Kind::Unsupported => "unsupported",
            Kind::Invalid => "invalid",
            Kind::Interrupted => "interrupted",
            Kind::Panic => "panic",
        }
    }

    /// The server did not keep up (refused, reset, timed out): the ramp steps down.
    pub fn is_refusal(self) -> bool {
        matches!(self, Kind::Connect | Kind::Io | Kind::Timeout)
    }
}

/// One item's failure: its kind, an HTTP status or errno (0: none), and what happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub kind: Kind,
    pub code: i32,
    pub message: String,
}

/// A failure as Python receives it: `(kind, HTTP status or errno, message)`.
pub type FailureRow = (&'static str, i32, String);

impl Failure {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            code: 0,
            message: message.into(),
        }
    }

    pub fn with_code(kind: Kind, code: i32, message: impl Into<String>) -> Self {
        Failure {
            kind,
            code,
            message: message.into(),
        }
    }

    /// The failure of work a stop (Ctrl-C) cut short.
    pub fn interrupted() -> Self {
        Failure::new(Kind::Interrupted, "interrupted (KeyboardInterrupt)")
    }

    /// A task of the core that failed (a panic) or a gate that closed: `what` says which.
    pub fn panic(what: &str) -> Self {
        Failure::new(Kind::Panic, what)
    }

    pub fn row(self) -> FailureRow {
        (self.kind.name(), self.code, self.message)
    }
}

/// A call the core refused or could not run; raised in Python.
#[derive(Debug)]
pub enum CallError {
    /// The arguments are wrong (`ValueError`): the message names the call and the argument.
    Args(String),
    /// The core could not run the call (no runtime, a panic outside the items): `RuntimeError`.
    Internal(String),
}

impl From<CallError> for PyErr {
    fn from(e: CallError) -> PyErr {
        match e {
            CallError::Args(m) => PyValueError::new_err(m),
            CallError::Internal(m) => PyRuntimeError::new_err(m),
        }
    }
}

/// Remove what may be a secret from a message: a URL's query string (a signature or token).
pub fn scrub(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut skipping = false;
    for c in msg.chars() {
        if c == '?' {
            skipping = true;
            out.push_str("?<redacted>");
            continue;
        }
        if skipping && (c.is_whitespace() || c == '"' || c == '\'' || c == ')') {
            skipping = false;
        }
        if !skipping {
            out.push(c);
        }
    }
    out
}

fn status_in(msg: &str) -> Option<u16> {
    let at = msg.find("status code: ")? + "status code: ".len();
    msg.get(at..at + 3)?.parse().ok()
}

fn http_kind(e: &(dyn std::error::Error + 'static)) -> Option<HttpErrorKind> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(h) = err.downcast_ref::<HttpError>() {
            return Some(h.kind());
        }
        cur = err.source();
    }
    None
}

/// Every message of an error's chain, joined (object_store's own text says "error sending request" where
/// its sources say why).
fn chain_text(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let t = err.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        cur = err.source();
    }
    parts.join(": ")
}

/// A TLS failure that no retry mends (the server's certificate is not trusted, expired, for another name),
/// named by its cause.
fn tls_failure(e: &object_store::Error) -> Option<Failure> {
    let text = chain_text(e);
    let lower = text.to_ascii_lowercase();
    let at = lower
        .find("invalid peer certificate")
        .or_else(|| lower.find("certificate"))?;
    let cause = text[at..]
        .split(": ")
        .take(2)
        .collect::<Vec<_>>()
        .join(": ");
    Some(Failure::new(
        Kind::Tls,
        format!("TLS: the server's certificate was refused ({cause})"),
    ))
}

/// The kind of a failure object_store reports, from its variant, else its status, else its text.
fn kind_of(e: &object_store::Error, msg: &str) -> (Kind, u16) {
    use object_store::Error as E;
    match e {
        E::NotFound { .. } => (Kind::NotFound, 404),
        E::PermissionDenied { .. } => (Kind::Permission, 403),
        E::Unauthenticated { .. } => (Kind::Permission, 401),
        E::Precondition { .. } => (Kind::Changed, 412),
        E::AlreadyExists { .. } => (Kind::Exists, 412),
        E::NotSupported { .. } => (Kind::RangeIgnored, 200),
        _ => match status_in(msg) {
            Some(404) => (Kind::NotFound, 404),
            Some(s @ (401 | 403)) => (Kind::Permission, s),
            Some(s) => (Kind::Status, s),
            None if msg.contains("non-partial response") => (Kind::RangeIgnored, 200),
            None if msg.contains("Content-Length Header missing") => (Kind::Unsupported, 0),
            None if msg.contains("Content-Range") || msg.contains("Requested ") => {
                (Kind::Range, 206)
            }
            // hyper's IncompleteMessage: the connection closed before any answer (a stale kept-alive one).
            None if msg.contains("connection closed before message completed") => (Kind::Stale, 0),
            // object_store's RetryError hides its HttpError from `source()` (transparent): read the text too.
            None => match http_kind(e) {
                Some(HttpErrorKind::Timeout) => (Kind::Timeout, 0),
                Some(HttpErrorKind::Connect) => (Kind::Connect, 0),
                Some(_) => (Kind::Io, 0),
                None if msg.contains("error sending request") => (Kind::Connect, 0),
                None if msg.contains("timed out") => (Kind::Timeout, 0),
                None if msg.contains("HTTP error") => (Kind::Io, 0),
                None => (Kind::Invalid, 0),
            },
        },
    }
}

impl From<&object_store::Error> for Failure {
    fn from(e: &object_store::Error) -> Self {
        if let Some(f) = tls_failure(e) {
            return f;
        }
        // The whole chain: object_store's own text says "error sending request" where its sources say why
        // ("Connection refused").
        let msg = scrub(&chain_text(e));
        let (kind, status) = kind_of(e, &msg);
        Failure::with_code(kind, i32::from(status), msg)
    }
}

/// A local file's failure: `what` (open, pread, stat) of `path`, with the errno.
pub fn from_io(e: &std::io::Error, what: &str, path: &std::path::Path) -> Failure {
    use std::io::ErrorKind as E;
    let kind = match e.kind() {
        E::NotFound | E::NotADirectory => Kind::NotFound,
        E::IsADirectory => Kind::IsDirectory,
        E::PermissionDenied => Kind::Permission,
        _ => Kind::Io,
    };
    Failure::with_code(
        kind,
        e.raw_os_error().unwrap_or(0),
        format!("{what} {}: {e}", path.display()),
    )
}
