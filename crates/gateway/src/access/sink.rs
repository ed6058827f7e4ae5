//! [`AccessLog`]: where finished exchanges go. The duration histograms are recorded on
//! the request's own thread (a few atomics); a line, when the log is on and the request is
//! sampled, is formatted there and put on a bounded queue that one writer thread drains
//! into standard output or the file. A full queue drops the line and counts it: the disk
//! never slows a request, and a flood of refused requests cannot grow memory. Refusal
//! lines have a budget of their own (a rate, and a quarter of the queue at most:
//! [`RefusalBudget`]), checked before a refusal's line is formatted, so a refusal flood
//! neither crowds served lines out of the queue nor costs a formatted line per refusal.
//!
//! The writer takes lines in batches ([`WRITER_REST`]): a queued line does not wake it
//! while it rests, so under load the hot path pays no thread wake-up and the disk one write
//! per batch.
//!
//! A reload reconfigures the log live (its format from the next request read) and always
//! reopens the file (after logrotate moved
//! it, SIGHUP starts a new one); a file that cannot be opened fails the reload and the old
//! one stays in use.

use super::refusal_budget::RefusalBudget;
use crate::config::{AccessLogConfig, AccessLogFormat};
use arc_swap::ArcSwapOption;
use metrics::{Counter, Histogram, counter, histogram};
use proxypool_core::LockExt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Bounds of the request duration histogram (seconds): a request answered from a warm
/// upstream connection takes a millisecond, one that dials through a slow proxy to a slow
/// origin may take its whole timeouts.
pub(crate) const REQUEST_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// Bounds of the tunnel duration histogram (seconds): a probe closes at once, a browser's
/// tunnel lives for minutes, a stream until its proxy's lease ends.
pub(crate) const TUNNEL_BUCKETS: &[f64] = &[
    0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];

/// How long the writer waits for a line before it looks at a reopen request.
const WRITER_TICK: Duration = Duration::from_millis(200);

/// How long the writer rests after writing a batch before it takes the next. While it
/// rests it is not waiting on the queue, so a request that queues a line wakes no thread:
/// under load lines are written in batches every few milliseconds, at the cost of a
/// line reaching the file that much later.
const WRITER_REST: Duration = Duration::from_millis(20);

/// The access log and the per-request histograms of one gateway.
#[derive(Debug)]
pub(crate) struct AccessLog {
    /// Off: exchanges collect nothing for a line.
    enabled: AtomicBool,
    sample_one_in: AtomicU32,
    /// The [`AccessLogFormat`] of lines from requests read from now on ([`format_code`]).
    format: AtomicU8,
    /// Served requests seen, for sampling one in N.
    served: AtomicU64,
    /// The queue's sending side; `None` once closed.
    sender: ArcSwapOption<SyncSender<Queued>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// The destination the writer should switch to, set by a reload.
    reopen: Arc<Reopen>,
    /// Request duration (until the answer's head) by kind: http, connect, socks5, https
    /// (inside an inspected tunnel).
    pub(super) request_seconds: [Histogram; 4],
    /// Tunnel life (from its start to its close) by kind: connect, socks5.
    pub(super) tunnel_seconds: [Histogram; 2],
    lines_dropped: Counter,
    /// What refusal lines may take of the rate and the queue.
    refusals: RefusalBudget,
    /// Refusal lines beyond their budget, never formatted.
    refusals_dropped: Counter,
}

/// A line on the queue, and whether it counts against the refusals' share.
#[derive(Debug)]
enum Queued {
    Served(Vec<u8>),
    Refusal(Vec<u8>),
}

/// A reload's request to the writer: write to this destination from now on.
#[derive(Debug, Default)]
struct Reopen {
    requested: AtomicBool,
    to: Mutex<Option<Destination>>,
}

/// Where lines go.
#[derive(Debug)]
enum Destination {
    Stdout,
    File(File),
}

impl Destination {
    fn open(config: &AccessLogConfig) -> Result<Destination, OpenError> {
        match &config.file {
            None => Ok(Destination::Stdout),
            Some(path) => open_append(path)
                .map(Destination::File)
                .map_err(|source| OpenError::of(config, source)),
        }
    }

    fn writer(self) -> BufWriter<Box<dyn Write + Send>> {
        let out: Box<dyn Write + Send> = match self {
            Destination::Stdout => Box::new(io::stdout()),
            Destination::File(file) => Box::new(file),
        };
        BufWriter::with_capacity(64 * 1024, out)
    }
}

fn open_append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o640)
        .open(path)
}

/// The access log could not open its file.
#[derive(Debug, thiserror::Error)]
#[error("access log {path}: {source}")]
pub(crate) struct OpenError {
    path: String,
    source: io::Error,
}

impl OpenError {
    fn of(config: &AccessLogConfig, source: io::Error) -> OpenError {
        let path = config.file.as_ref().map_or_else(
            || "standard output".to_owned(),
            |path| path.display().to_string(),
        );
        OpenError { path, source }
    }
}

impl AccessLog {
    /// The log as `config` says, its writer thread started; fails when the file cannot
    /// be opened for appending. Registers the histograms' bounds before their handles.
    pub(crate) fn start(config: &AccessLogConfig) -> Result<Arc<AccessLog>, OpenError> {
        let destination = Destination::open(config)?;
        proxypool_metrics::set_buckets(REQUEST_SECONDS, REQUEST_BUCKETS);
        proxypool_metrics::set_buckets(TUNNEL_SECONDS, TUNNEL_BUCKETS);
        let (sender, receiver) = sync_channel(config.queue);
        let reopen = Arc::new(Reopen::default());
        let refusals = RefusalBudget::new(config.refusals_per_second, config.queue);
        let out = Written {
            refusals_queued: refusals.queued(),
            written: counter!(LINES, "outcome" => "written"),
            failed: counter!(LINES, "outcome" => "failed"),
        };
        let writer = {
            let reopen = Arc::clone(&reopen);
            std::thread::Builder::new()
                .name("access-log".into())
                .spawn(move || write_lines(receiver, destination, &reopen, &out))
                .map_err(|source| OpenError::of(config, source))?
        };
        Ok(Arc::new(AccessLog {
            enabled: AtomicBool::new(config.enabled),
            sample_one_in: AtomicU32::new(config.sample_one_in.max(1)),
            format: AtomicU8::new(format_code(config.format)),
            served: AtomicU64::new(0),
            sender: ArcSwapOption::from_pointee(sender),
            writer: Mutex::new(Some(writer)),
            reopen,
            request_seconds: ["http", "connect", "socks5", "https"]
                .map(|kind| histogram!(REQUEST_SECONDS, "kind" => kind)),
            tunnel_seconds: ["connect", "socks5"]
                .map(|kind| histogram!(TUNNEL_SECONDS, "kind" => kind)),
            lines_dropped: counter!(LINES, "outcome" => "dropped"),
            refusals,
            refusals_dropped: counter!(DROPPED, "kind" => "refusal"),
        }))
    }

    /// Applies a reloaded `[gateway.access_log]` and reopens the file (or standard output):
    /// the new file is opened here, so a path that cannot be opened fails the reload and
    /// the log goes on where it was. The queue's size stays as started.
    pub(crate) fn reconfigure(&self, config: &AccessLogConfig) -> Result<(), OpenError> {
        let destination = Destination::open(config)?;
        *self.reopen.to.lock_or_recover() = Some(destination);
        self.reopen.requested.store(true, Ordering::Release);
        self.sample_one_in
            .store(config.sample_one_in.max(1), Ordering::Relaxed);
        self.format
            .store(format_code(config.format), Ordering::Relaxed);
        self.refusals.set_rate(config.refusals_per_second);
        self.enabled.store(config.enabled, Ordering::Relaxed);
        Ok(())
    }

    /// Whether an exchange starting now should collect the fields of a line.
    pub(crate) fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// The format of a line for a request read now.
    pub(super) fn format(&self) -> AccessLogFormat {
        match self.format.load(Ordering::Relaxed) {
            1 => AccessLogFormat::Squid,
            2 => AccessLogFormat::Combined,
            _ => AccessLogFormat::Json,
        }
    }

    /// Whether a served request (not refused) is one of the sampled ones.
    pub(super) fn sampled(&self) -> bool {
        let one_in = u64::from(self.sample_one_in.load(Ordering::Relaxed));
        one_in <= 1
            || self
                .served
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(one_in)
    }

    /// Queues one served request's line; drops and counts it when the writer is behind or
    /// the log closed.
    pub(super) fn push(&self, line: Vec<u8>) {
        if !self.send(Queued::Served(line)) {
            self.lines_dropped.increment(1);
        }
    }

    /// Whether a refusal's line fits the refusals' budget (asked before it is formatted);
    /// one that does not is counted as dropped. `true` holds a place for
    /// [`push_refusal`](Self::push_refusal).
    pub(super) fn refusal_admitted(&self) -> bool {
        let admitted = self.refusals.take();
        if !admitted {
            self.refusals_dropped.increment(1);
        }
        admitted
    }

    /// Queues a refusal's line admitted by [`refusal_admitted`](Self::refusal_admitted).
    pub(super) fn push_refusal(&self, line: Vec<u8>) {
        if !self.send(Queued::Refusal(line)) {
            self.refusals.release();
            self.lines_dropped.increment(1);
        }
    }

    fn send(&self, line: Queued) -> bool {
        self.sender
            .load()
            .as_ref()
            .is_some_and(|sender| sender.try_send(line).is_ok())
    }

    /// Stops taking lines and waits until the writer has written and flushed what was
    /// queued: the gateway calls it last, so every request it served is on disk when it
    /// exits.
    pub(crate) fn close(&self) {
        self.sender.store(None);
        let writer = self.writer.lock_or_recover().take();
        if let Some(writer) = writer {
            let _ = writer.join();
        }
    }
}

/// [`AccessLogFormat`] as the atomic holds it.
fn format_code(format: AccessLogFormat) -> u8 {
    match format {
        AccessLogFormat::Json => 0,
        AccessLogFormat::Squid => 1,
        AccessLogFormat::Combined => 2,
    }
}

/// What the writer counts: lines written and failed, and the refusal lines still queued.
struct Written {
    refusals_queued: Arc<AtomicUsize>,
    written: Counter,
    failed: Counter,
}

/// The writer thread: writes lines as they come, flushing whenever the queue runs dry,
/// switches destination when a reload asks, and ends (flushed) when every sender is gone.
fn write_lines(
    lines: Receiver<Queued>,
    destination: Destination,
    reopen: &Reopen,
    counts: &Written,
) {
    let mut out = destination.writer();
    let mut warned = false;
    let mut write = |out: &mut BufWriter<Box<dyn Write + Send>>, line: Queued| {
        let line = match line {
            Queued::Served(line) => line,
            Queued::Refusal(line) => {
                // Off the queue: its place in the refusals' share is free again.
                counts.refusals_queued.fetch_sub(1, Ordering::AcqRel);
                line
            }
        };
        match out.write_all(&line) {
            Ok(()) => {
                counts.written.increment(1);
                warned = false;
            }
            Err(error) => {
                counts.failed.increment(1);
                // Once per failing stretch: a full disk must not flood the process log.
                if !warned {
                    tracing::warn!(%error, "the access log cannot be written");
                    warned = true;
                }
            }
        }
    };
    loop {
        let first = match lines.recv_timeout(WRITER_TICK) {
            Ok(line) => Some(line),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                let _ = out.flush();
                return;
            }
        };
        // Before writing: a line queued after a reload returned belongs in the new file.
        if reopen.requested.swap(false, Ordering::Acquire)
            && let Some(next) = reopen.to.lock_or_recover().take()
        {
            let _ = out.flush();
            out = next.writer();
        }
        if let Some(line) = first {
            write(&mut out, line);
            while let Ok(line) = lines.try_recv() {
                write(&mut out, line);
            }
            let _ = out.flush();
            std::thread::sleep(WRITER_REST);
        }
    }
}

/// `proxypool_gateway_request_duration_seconds{kind}`.
pub(crate) const REQUEST_SECONDS: &str = "proxypool_gateway_request_duration_seconds";
/// `proxypool_gateway_tunnel_duration_seconds{kind}`.
pub(crate) const TUNNEL_SECONDS: &str = "proxypool_gateway_tunnel_duration_seconds";
/// `proxypool_gateway_access_log_lines_total{outcome}`.
pub(crate) const LINES: &str = "proxypool_gateway_access_log_lines_total";
/// `proxypool_gateway_access_log_dropped_total{kind}`: lines beyond their kind's budget.
pub(crate) const DROPPED: &str = "proxypool_gateway_access_log_dropped_total";
