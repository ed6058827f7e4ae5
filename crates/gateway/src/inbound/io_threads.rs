//! The client listeners' connections served on per-core threads (`io_threads`).
//!
//! Each I/O thread runs its own single-threaded tokio runtime and the ordinary accept loop
//! ([`crate::inbound::accept`]) on its own registration of every client listening socket (a
//! `try_clone` of the bound socket). A connection accepted there lives on that thread with
//! everything it starts: its hyper server task, the upstream dial, the upstream
//! connection's hyper client task, a CONNECT or SOCKS5 tunnel. A forwarded request then
//! never crosses threads, so the hot path pays no cross-thread wake-ups, and no parked
//! worker is woken to steal. The kept-alive upstream pool is sharded by [`current`], so a
//! pooled connection is only handed to the thread that drives it.
//!
//! Why one shared socket rather than `SO_REUSEPORT` sockets: the kernel then wakes every
//! thread's registration for a new connection and all but one find nothing to accept, an
//! extra wake-up per connection per thread beyond the first (cheap for the few threads of
//! a gateway). In return binding keeps its meaning (a second process cannot bind the same
//! port by mistake), a busy thread leaves new connections to an idle one instead of
//! having its own backlog, and stopping to accept closes one socket with nothing queued in
//! a per-thread backlog to reset.
//!
//! Everything shared across connections stays shared (atomics, the shield, the caps, the
//! snapshot store): admission and every listener timeout are the same on every thread.
//! The control loop, the keeper, maintenance and the admin listener stay on the runtime
//! that runs [`crate::Gateway`]. The threads stop accepting when the gateway drains and
//! end when it stops, dropping their runtimes (and any task left on them) on their own
//! thread; [`IoThreads::join`] waits for every one.

use crate::context::Phase;
use crate::inbound::{http as http_listener, socks, tls_accept};
use crate::metrics::Listener;
use crate::state::Shared;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// The client listening sockets one thread accepts on.
#[derive(Debug)]
pub(crate) struct ThreadListeners {
    pub http: Option<std::net::TcpListener>,
    pub https: Option<std::net::TcpListener>,
    pub socks5: Option<std::net::TcpListener>,
}

impl ThreadListeners {
    /// One set per thread for `threads` threads: the sockets themselves and `threads - 1`
    /// clones of each (the same listening socket, registered separately).
    pub(crate) fn split(
        http: Option<std::net::TcpListener>,
        https: Option<std::net::TcpListener>,
        socks5: Option<std::net::TcpListener>,
        threads: usize,
    ) -> std::io::Result<Vec<ThreadListeners>> {
        let clone = |listener: &Option<std::net::TcpListener>| {
            listener.as_ref().map(|l| l.try_clone()).transpose()
        };
        let mut sets = Vec::with_capacity(threads);
        for _ in 1..threads {
            sets.push(ThreadListeners {
                http: clone(&http)?,
                https: clone(&https)?,
                socks5: clone(&socks5)?,
            });
        }
        sets.push(ThreadListeners {
            http,
            https,
            socks5,
        });
        Ok(sets)
    }
}

/// Started I/O threads, each waiting for [`IoThreads::serve`].
#[derive(Debug)]
pub(crate) struct IoThreads {
    threads: Vec<IoThread>,
}

#[derive(Debug)]
struct IoThread {
    handle: std::thread::JoinHandle<()>,
    /// Sent to begin serving; dropped unsent (the gateway never ran) the thread just ends.
    go: Option<oneshot::Sender<()>>,
    /// Completes (closed) once the thread has dropped its runtime.
    done: oneshot::Receiver<()>,
}

impl IoThreads {
    /// Starts one thread per listener set, each with its runtime built; an error if a
    /// thread or runtime cannot be created (the ones already started then end).
    pub(crate) async fn start(
        sets: Vec<ThreadListeners>,
        shared: &Arc<Shared>,
    ) -> std::io::Result<IoThreads> {
        let mut threads = Vec::with_capacity(sets.len());
        for (index, listeners) in sets.into_iter().enumerate() {
            let (go, go_rx) = oneshot::channel();
            let (built, built_rx) = oneshot::channel();
            let (done, done_rx) = oneshot::channel::<()>();
            let shared = Arc::clone(shared);
            let handle = std::thread::Builder::new()
                .name(format!("gateway-io-{index}"))
                .spawn(move || {
                    let _done = done;
                    run_thread(index, listeners, shared, built, go_rx);
                })?;
            threads.push(IoThread {
                handle,
                go: Some(go),
                done: done_rx,
            });
            match built_rx.await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => return Err(error),
                Err(_) => return Err(std::io::Error::other("an I/O thread ended at start")),
            }
        }
        Ok(IoThreads { threads })
    }

    /// Lets every thread accept.
    pub(crate) fn serve(&mut self) {
        for thread in &mut self.threads {
            if let Some(go) = thread.go.take() {
                let _ = go.send(());
            }
        }
    }

    /// Waits until every thread has ended (after the gateway stopped).
    pub(crate) async fn join(self) {
        for thread in self.threads {
            drop(thread.go);
            // Closed (never sent) once the thread dropped its runtime: joining is then
            // immediate, so it does not block this runtime.
            let _ = thread.done.await;
            if thread.handle.join().is_err() {
                tracing::error!("an I/O thread panicked");
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.threads.len()
    }
}

/// One I/O thread: build the runtime, report, wait for the go, accept until the gateway
/// drains, serve what is open until it stops, then drop the runtime here.
fn run_thread(
    index: usize,
    listeners: ThreadListeners,
    shared: Arc<Shared>,
    built: oneshot::Sender<std::io::Result<()>>,
    go: oneshot::Receiver<()>,
) {
    crate::proxies::idle_pool::set_current(index);
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            let _ = built.send(Err(error));
            return;
        }
    };
    let _ = built.send(Ok(()));
    runtime.block_on(async move {
        if go.await.is_err() {
            return;
        }
        for (listener, kind) in [
            (listeners.http, Listener::Http),
            (listeners.https, Listener::Https),
            (listeners.socks5, Listener::Socks5),
        ] {
            let Some(listener) = listener else { continue };
            let listener = match listener
                .set_nonblocking(true)
                .and_then(|()| tokio::net::TcpListener::from_std(listener))
            {
                Ok(listener) => listener,
                Err(error) => {
                    tracing::error!(%error, ?kind, index, "an I/O thread cannot accept");
                    continue;
                }
            };
            let shared = Arc::clone(&shared);
            match kind {
                Listener::Http => tokio::spawn(http_listener::serve(listener, shared)),
                Listener::Https => tokio::spawn(tls_accept::serve(listener, shared)),
                Listener::Socks5 => tokio::spawn(socks::serve(listener, shared)),
            };
        }
        let mut phase = shared.phase.clone();
        let _ = phase.wait_for(|p| *p == Phase::Stopped).await;
        settle(&shared).await;
    });
    drop(runtime);
}

/// After the stop: lets the connections and tunnels the stop ends finish on this thread,
/// so they give back their counts and gauges instead of being dropped mid-way with the
/// runtime. The kept-alive upstream connections are let go first (their tasks end once
/// nothing holds them); whatever is still alive after [`SETTLE_LIMIT`] goes with the
/// runtime.
async fn settle(shared: &Shared) {
    for (_, slot) in shared.store.registry().slots() {
        slot.idle.clear();
    }
    let runtime = tokio::runtime::Handle::current();
    let settled = async {
        while runtime.metrics().num_alive_tasks() > 0 {
            tokio::time::sleep(SETTLE_POLL).await;
        }
    };
    if tokio::time::timeout(SETTLE_LIMIT, settled).await.is_err() {
        tracing::warn!(
            tasks = runtime.metrics().num_alive_tasks(),
            "an I/O thread stopped with tasks still running"
        );
    }
}

/// The longest an I/O thread waits after the stop for its tasks to end.
const SETTLE_LIMIT: Duration = Duration::from_secs(1);
/// How often it looks (only while stopping).
const SETTLE_POLL: Duration = Duration::from_millis(2);
