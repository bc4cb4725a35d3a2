//! Ctrl-C during a call. The calling thread waits on the runtime with the GIL released and looks for an
//! interrupt every `TICK`: on the main thread with `PyErr_CheckSignals` (the GIL taken for that moment), on
//! another thread (zarr's and asyncio's pools) through a hook in front of Python's SIGINT handler, while
//! Python's handler is the default one. An interrupt sets the call's `Stop`; its tasks end at their next await
//! (an upload aborts its multipart upload first), and once every task is over the call raises
//! `KeyboardInterrupt`: nothing of the call runs, or writes into the caller's buffer, after it returns.
//!
//! The hook is a C signal handler (`sigaction`): the one module beside `slots` with `unsafe` code.
#![allow(unsafe_code)]

use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::runtime::Runtime;
use tokio::sync::{mpsc, watch};

/// How often the waiting thread looks for an interrupt.
const TICK: Duration = Duration::from_millis(50);

/// The stop signal of one call, shared by its tasks.
#[derive(Clone)]
pub struct Stop(watch::Receiver<bool>);

impl Stop {
    /// A signal and the switch that sets it.
    pub fn new() -> (watch::Sender<bool>, Self) {
        let (tx, rx) = watch::channel(false);
        (tx, Stop(rx))
    }

    pub fn is_set(&self) -> bool {
        *self.0.borrow()
    }

    /// Completes once the call is stopped; never, if it is not.
    pub async fn wait(&self) {
        let mut rx = self.0.clone();
        if rx.wait_for(|s| *s).await.is_err() {
            // The switch is gone: the call is over and nothing stops it any more.
            std::future::pending::<()>().await;
        }
    }
}

/// SIGINTs seen by the hook since it was installed.
static SIGINTS: AtomicU64 = AtomicU64::new(0);
/// The handler the hook runs after counting (Python's), and whether it takes `siginfo`.
static PREVIOUS: AtomicUsize = AtomicUsize::new(0);
static PREVIOUS_SIGINFO: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // Async-signal-safe: an atomic add, then the handler that was there before.
    SIGINTS.fetch_add(1, Ordering::SeqCst);
    let prev = PREVIOUS.load(Ordering::SeqCst);
    if prev == libc::SIG_DFL || prev == libc::SIG_IGN {
        return; // never installed in front of those (see `install`)
    }
    // SAFETY: `prev` is the address of the handler sigaction() reported for SIGINT, of the kind its flags say.
    unsafe {
        if PREVIOUS_SIGINFO.load(Ordering::SeqCst) {
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                std::mem::transmute(prev);
            f(sig, info, ctx);
        } else {
            let f: extern "C" fn(libc::c_int) = std::mem::transmute(prev);
            f(sig);
        }
    }
}

/// Put the hook in front of SIGINT's handler, unless it is there already or the handler is the default
/// (the process dies) or ignores the signal. Python replacing its handler later removes the hook; the next
/// call puts it back. Called with the GIL held (one caller at a time).
fn install() {
    let ours = on_sigint as *const () as usize;
    // SAFETY: plain sigaction() calls on a zeroed struct; the handler stored is a valid function.
    unsafe {
        let mut cur: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGINT, std::ptr::null(), &mut cur) != 0 {
            return;
        }
        let h = cur.sa_sigaction;
        if h == ours || h == libc::SIG_DFL || h == libc::SIG_IGN {
            return;
        }
        PREVIOUS.store(h, Ordering::SeqCst);
        PREVIOUS_SIGINFO.store(cur.sa_flags & libc::SA_SIGINFO != 0, Ordering::SeqCst);
        let mut new = cur;
        new.sa_sigaction = ours;
        new.sa_flags = cur.sa_flags | libc::SA_SIGINFO;
        libc::sigaction(libc::SIGINT, &new, std::ptr::null_mut());
    }
}

/// How the calling thread learns of an interrupt.
enum Watch {
    /// The main thread: Python's own signal check (it runs the handlers, which raise).
    Main,
    /// Another thread while Ctrl-C raises `KeyboardInterrupt`: a SIGINT after this count.
    Other(u64),
    /// Another thread while SIGINT is handled otherwise: the call is not interrupted.
    Never,
}

impl Watch {
    fn new(py: Python<'_>) -> PyResult<Self> {
        let threading = py.import("threading")?;
        let main = threading.getattr("main_thread")?.call0()?;
        if threading.getattr("current_thread")?.call0()?.is(&main) {
            return Ok(Watch::Main);
        }
        let signal = py.import("signal")?;
        let handler = signal.getattr("getsignal")?.call1((libc::SIGINT,))?;
        if !handler.is(&signal.getattr("default_int_handler")?) {
            return Ok(Watch::Never);
        }
        install();
        Ok(Watch::Other(SIGINTS.load(Ordering::SeqCst)))
    }

    fn check(&self) -> PyResult<()> {
        match self {
            Watch::Main => Python::with_gil(|py| py.check_signals()),
            Watch::Other(seen) if SIGINTS.load(Ordering::SeqCst) != *seen => Err(
                PyKeyboardInterrupt::new_err("the core's requests were stopped (SIGINT)"),
            ),
            _ => Ok(()),
        }
    }
}

/// Run `work(stop)` on the runtime with the GIL released until it completes. An interrupt sets `stop`;
/// the interrupt's exception (`KeyboardInterrupt`) is raised once the work is over (it must end soon after
/// `stop`: every task ends at its next await). A panic inside the work is `Err(None)`.
pub fn run<T, F>(
    py: Python<'_>,
    rt: &Runtime,
    work: impl FnOnce(Stop) -> F,
) -> Result<PyResult<T>, ()>
where
    F: Future<Output = T> + Send,
    T: Send,
{
    run_noting(py, rt, work, None::<Notes<()>>)
}

/// What the work tells the caller while it runs, and the caller's Python function that takes each note.
pub type Notes<N> = (
    mpsc::UnboundedReceiver<N>,
    Box<dyn Fn(Python<'_>, N) -> PyResult<()> + Send + Sync>,
);

/// [`run`], with each note the work sends handed to `notes`' function on the calling thread (the GIL taken
/// for it), in the order sent, the last ones before the call returns. A note's function that raises stops
/// the work as an interrupt does, and its exception is raised once the work is over.
pub fn run_noting<T, F, N>(
    py: Python<'_>,
    rt: &Runtime,
    work: impl FnOnce(Stop) -> F,
    notes: Option<Notes<N>>,
) -> Result<PyResult<T>, ()>
where
    F: Future<Output = T> + Send,
    T: Send,
    N: Send,
{
    let watch = match Watch::new(py) {
        Ok(w) => w,
        Err(e) => return Ok(Err(e)),
    };
    let (switch, stop) = Stop::new();
    let fut = work(stop);
    let (mut rx, take) = notes.unzip();
    let take_note = |note: N| -> PyResult<()> {
        match &take {
            Some(f) => Python::with_gil(|py| f(py, note)),
            None => Ok(()),
        }
    };
    py.allow_threads(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            rt.block_on(async {
                tokio::pin!(fut);
                let mut raised: Option<PyErr> = None;
                loop {
                    tokio::select! {
                        out = &mut fut => {
                            // Every note was sent before the work ended: those not taken yet are taken now.
                            while let Some(note) = rx.as_mut().and_then(|r| r.try_recv().ok()) {
                                if raised.is_none() {
                                    raised = take_note(note).err();
                                }
                            }
                            return raised.map_or(Ok(out), Err);
                        }
                        note = next_note(&mut rx), if raised.is_none() => match note {
                            Some(note) => {
                                if let Err(e) = take_note(note) {
                                    let _ = switch.send(true);
                                    raised = Some(e);
                                }
                            }
                            None => rx = None, // every sender is gone: no more notes
                        },
                        _ = tokio::time::sleep(TICK), if raised.is_none() => {
                            if let Err(e) = watch.check() {
                                let _ = switch.send(true);
                                raised = Some(e);
                            }
                        }
                    }
                }
            })
        }))
        .map_err(|_| ())
    })
}

/// The next note; never, where there are none to wait for.
async fn next_note<N>(rx: &mut Option<mpsc::UnboundedReceiver<N>>) -> Option<N> {
    match rx {
        Some(r) => r.recv().await,
        None => std::future::pending().await,
    }
}
