//! Server child processes: spawning, the janitor, signals, bounded waits, ports, log tails.
//!
//! Killing the server in `Drop` covers passing and panicking tests (panics unwind through
//! the guard). It does not cover a test process that is itself killed (a CI timeout, `kill
//! -9`), and PostgreSQL has no "die with my parent" mode. So each server gets a *janitor*:
//! a tiny `sh` whose stdin is a pipe whose only writer is the test process. The pipe
//! reaches end-of-file exactly when the test process is gone, however it died; the janitor
//! then stops the server and removes its directory. An orderly stop disarms the janitor
//! first (kills it) and reaps the server afterwards, so the janitor can never signal a
//! recycled pid.
//!
//! Servers stay in the test's process group on purpose: Ctrl-C then reaches them directly
//! (redis exits on SIGINT, PostgreSQL shuts down fast), while janitors ignore SIGINT so
//! that they still clean up after the test process.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::{Result, TestkitError};
use crate::privilege::ServerUser;

/// How long a server gets to become ready (or to stop) before the testkit gives up.
pub(crate) const READINESS_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a graceful stop may take before the testkit escalates to SIGKILL.
pub(crate) const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// Polling interval of the readiness and exit waits.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// The janitor. `$1` = signal for the server, `$2` = server pid, `$3` = directory to remove
/// (`-` for none). It waits for end-of-file on stdin, signals the server, gives it a few
/// seconds, SIGKILLs it if still there, then removes the directory.
const JANITOR_SCRIPT: &str = r#"
trap '' INT HUP TERM
read -r _ignored || :
if [ "$2" != - ]; then
  kill -s "$1" "$2" 2>/dev/null
  tries=0
  while kill -0 "$2" 2>/dev/null && [ "$tries" -lt 50 ]; do
    sleep 0.1
    tries=$((tries + 1))
  done
  kill -s KILL "$2" 2>/dev/null
fi
if [ "$3" != - ]; then
  rm -rf "$3"
fi
"#;

/// A process that cleans up after the test process dies, unless disarmed first.
#[derive(Debug)]
pub(crate) struct Janitor {
    /// Owns the pipe's write end (the child's stdin); closing it triggers the janitor.
    child: Child,
}

impl Janitor {
    /// Arms a janitor for `server_pid` (may be `None` for a directory-only janitor).
    pub(crate) fn arm(
        signal: &str,
        server_pid: Option<u32>,
        directory: Option<&Path>,
    ) -> Result<Self> {
        let pid = server_pid.map_or_else(|| "-".to_owned(), |pid| pid.to_string());
        let directory =
            directory.map_or_else(|| OsString::from("-"), |dir| dir.as_os_str().to_owned());
        let child = Command::new("sh")
            .arg("-c")
            .arg(JANITOR_SCRIPT)
            .arg("proxypool-testkit-janitor")
            .arg(signal)
            .arg(pid)
            .arg(directory)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            // Holding no directory open keeps the janitor from pinning a mount or scratch dir.
            .current_dir("/")
            .spawn()
            .map_err(|error| TestkitError::io("spawning the janitor (sh)", error))?;
        Ok(Self { child })
    }

    /// Stops the janitor without letting it act.
    pub(crate) fn disarm(mut self) {
        // SIGKILL arrives before the janitor could see end-of-file: we still hold the
        // pipe's write end (in `self.child.stdin`) until after the kill.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a server child is started with.
#[derive(Debug)]
pub(crate) struct Launch<'a> {
    /// `redis-server` or `postgres`, for messages.
    pub(crate) server: &'static str,
    pub(crate) program: &'a Path,
    pub(crate) args: Vec<OsString>,
    /// stdout and stderr go here (appended, so a restart keeps the earlier history).
    pub(crate) log: &'a Path,
    pub(crate) working_dir: &'a Path,
    /// Run as this account (PostgreSQL under root), else as ourselves.
    pub(crate) user: Option<&'a ServerUser>,
    /// The signal the janitor sends: what makes this server stop quickly and cleanly.
    pub(crate) janitor_signal: &'static str,
    /// What the janitor removes after stopping the server.
    pub(crate) janitor_removes: Option<&'a Path>,
}

/// A running server child with its janitor.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    server: &'static str,
    child: Child,
    janitor: Option<Janitor>,
    exit_status: Option<ExitStatus>,
}

fn open_log(log: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|error| TestkitError::io(format!("opening log {}", log.display()), error))
}

impl ServerProcess {
    pub(crate) fn spawn(launch: &Launch<'_>) -> Result<Self> {
        let log = open_log(launch.log)?;
        let log_for_stderr = log
            .try_clone()
            .map_err(|error| TestkitError::io("duplicating the log handle", error))?;
        let mut command = Command::new(launch.program);
        command
            .args(&launch.args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_for_stderr))
            .current_dir(launch.working_dir)
            // The C locale avoids "locale not installed" surprises on minimal machines.
            .env("LC_ALL", "C");
        if let Some(user) = launch.user {
            command.uid(user.uid).gid(user.gid);
        }
        let child = command.spawn().map_err(|error| {
            TestkitError::io(format!("spawning {}", launch.program.display()), error)
        })?;
        let janitor = Janitor::arm(
            launch.janitor_signal,
            Some(child.id()),
            launch.janitor_removes,
        );
        let mut process = Self {
            server: launch.server,
            child,
            janitor: None,
            exit_status: None,
        };
        match janitor {
            Ok(janitor) => process.janitor = Some(janitor),
            Err(error) => {
                process.kill_now();
                return Err(error);
            }
        }
        Ok(process)
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit status if the server has exited (reaping it, and disarming the janitor
    /// because the pid may now be recycled).
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        if self.exit_status.is_none()
            && let Ok(Some(status)) = self.child.try_wait()
        {
            self.exit_status = Some(status);
            self.disarm_janitor();
        }
        self.exit_status
    }

    fn disarm_janitor(&mut self) {
        if let Some(janitor) = self.janitor.take() {
            janitor.disarm();
        }
    }

    /// Sends `signal` (a name such as `QUIT`) through the shell's `kill` builtin: std can
    /// only send SIGKILL, and `libc::kill` would need `unsafe`.
    pub(crate) fn signal(&self, signal: &str) -> Result<()> {
        let status = Command::new("sh")
            .args(["-c", r#"kill -s "$1" "$2""#, "proxypool-testkit-kill"])
            .arg(signal)
            .arg(self.pid().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|error| {
                TestkitError::io(format!("sending SIG{signal} to {}", self.server), error)
            })?;
        if status.success() {
            Ok(())
        } else {
            Err(TestkitError::CommandFailed {
                program: format!("kill -s {signal} {}", self.pid()),
                status: status.to_string(),
                output: String::new(),
            })
        }
    }

    fn wait_for_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// Stops the server: `signal` first (e.g. `QUIT`), SIGKILL if it outlives `timeout`.
    /// Always reaps it, so the port and data directory are free afterwards.
    pub(crate) fn stop(&mut self, signal: &str, timeout: Duration) {
        if self.exit_status.is_some() {
            return;
        }
        // Disarm before the server can be reaped: a reaped pid may be recycled.
        self.disarm_janitor();
        if signal == "KILL" || self.signal(signal).is_err() {
            self.kill_now();
            return;
        }
        if self.wait_for_exit(timeout).is_none() {
            self.kill_now();
        }
    }

    fn kill_now(&mut self) {
        self.disarm_janitor();
        let _ = self.child.kill();
        if let Ok(status) = self.child.wait() {
            self.exit_status = Some(status);
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Guards normally stop their server themselves with the right signal; this is the
        // backstop that guarantees no child outlives its handle.
        if self.exit_status.is_none() {
            self.kill_now();
        }
    }
}

/// Why a start attempt failed, and whether another port might fix it.
#[derive(Debug)]
pub(crate) struct StartFailure {
    pub(crate) error: TestkitError,
    /// The server said "Address already in use": someone took the port between our probe
    /// and its bind, and a fresh port is worth a retry.
    pub(crate) port_taken: bool,
}

impl From<TestkitError> for StartFailure {
    fn from(error: TestkitError) -> Self {
        Self {
            error,
            port_taken: false,
        }
    }
}

/// Polls `probe` until it answers `Ok`, the server exits, or [`READINESS_TIMEOUT`] passes.
///
/// `log_offset` is the log's length before this start, so "address in use" from an earlier
/// attempt is not mistaken for this one's.
pub(crate) fn wait_until_ready(
    process: &mut ServerProcess,
    log: &Path,
    log_offset: u64,
    mut probe: impl FnMut() -> std::result::Result<(), String>,
) -> std::result::Result<(), StartFailure> {
    let started = Instant::now();
    loop {
        if let Some(status) = process.exited() {
            let port_taken = log_text_since(log, log_offset).contains("Address already in use");
            return Err(StartFailure {
                error: TestkitError::ExitedEarly {
                    server: process.server,
                    status: status.to_string(),
                    log: log.to_path_buf(),
                    log_tail: log_tail(log, 30),
                },
                port_taken,
            });
        }
        let last_probe = match probe() {
            Ok(()) => return Ok(()),
            Err(observed) => observed,
        };
        if started.elapsed() >= READINESS_TIMEOUT {
            let server = process.server;
            process.kill_now();
            return Err(StartFailure {
                error: TestkitError::NotReady {
                    server,
                    waited: started.elapsed(),
                    last_probe,
                    log: log.to_path_buf(),
                    log_tail: log_tail(log, 30),
                },
                port_taken: false,
            });
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// The current length of a log file (0 when it does not exist yet).
pub(crate) fn log_len(log: &Path) -> u64 {
    std::fs::metadata(log)
        .map(|metadata| metadata.len())
        .unwrap_or(0)
}

fn log_text_since(log: &Path, offset: u64) -> String {
    let mut text = Vec::new();
    if let Ok(mut file) = File::open(log)
        && file.seek(SeekFrom::Start(offset)).is_ok()
    {
        let _ = file.read_to_end(&mut text);
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// Ports handed out by this process, never handed out twice: two servers started
/// back-to-back could otherwise be offered the same just-released ephemeral port.
static HANDED_OUT_PORTS: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A loopback port that was free a moment ago.
///
/// There is an unavoidable window between releasing the probe socket and the server
/// binding it; the guards retry on a new port when the server reports "address in use".
pub(crate) fn free_loopback_port() -> Result<u16> {
    let mut handed_out = HANDED_OUT_PORTS
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    let handed_out = handed_out.get_or_insert_with(HashSet::new);
    for _ in 0..64 {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .map_err(|error| TestkitError::io("binding a probe socket on 127.0.0.1", error))?;
        let port = listener
            .local_addr()
            .map_err(|error| TestkitError::io("reading the probe socket's port", error))?
            .port();
        if handed_out.insert(port) {
            return Ok(port);
        }
    }
    Err(TestkitError::io(
        "finding a free loopback port",
        std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            "the kernel kept offering used ports",
        ),
    ))
}

/// The last `max_lines` lines of a log file (reads at most the last 16 KiB).
pub(crate) fn log_tail(log: &Path, max_lines: usize) -> String {
    const MAX_BYTES: u64 = 16 * 1024;
    let Ok(mut file) = File::open(log) else {
        return format!("(no log at {})", log.display());
    };
    let length = file.metadata().map(|metadata| metadata.len()).unwrap_or(0);
    if file
        .seek(SeekFrom::Start(length.saturating_sub(MAX_BYTES)))
        .is_err()
    {
        return "(log unreadable)".to_owned();
    }
    let mut bytes = Vec::new();
    if file.read_to_end(&mut bytes).is_err() {
        return "(log unreadable)".to_owned();
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(max_lines)..].join("\n");
    if tail.is_empty() {
        "(log empty)".to_owned()
    } else {
        tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_never_handed_out_twice() {
        let ports: HashSet<u16> = (0..50).map(|_| free_loopback_port().unwrap()).collect();
        assert_eq!(ports.len(), 50);
    }

    #[test]
    fn log_tail_keeps_the_last_lines() {
        let dir = crate::scratch::ScratchDir::create(&std::env::temp_dir(), "unit").unwrap();
        let log = dir.path().join("log");
        let text: String = (0..100).map(|line| format!("line {line}\n")).collect();
        std::fs::write(&log, text).unwrap();
        assert_eq!(log_tail(&log, 2), "line 98\nline 99");
        assert!(log_tail(&dir.path().join("missing"), 2).starts_with("(no log"));
    }

    #[test]
    fn janitor_stops_the_server_and_removes_its_directory_when_the_owner_vanishes() {
        let dir = crate::scratch::ScratchDir::create(&std::env::temp_dir(), "unit").unwrap();
        let doomed = dir.path().join("doomed");
        std::fs::create_dir(&doomed).unwrap();
        let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
        let mut janitor = Janitor::arm("TERM", Some(sleeper.id()), Some(&doomed)).unwrap();
        // Closing the write end is what the kernel does when the test process dies.
        drop(janitor.child.stdin.take());
        // Reap the sleeper first, as init would for an orphan: a zombie still answers
        // `kill -0`, which would keep the janitor waiting for its full grace period.
        let sleeper_status = sleeper.wait().unwrap();
        assert!(
            !sleeper_status.success(),
            "sleep should have been signalled"
        );
        let status = janitor.child.wait().unwrap();
        assert!(status.success());
        assert!(!doomed.exists());
    }

    #[test]
    fn a_disarmed_janitor_does_nothing() {
        let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
        let janitor = Janitor::arm("TERM", Some(sleeper.id()), None).unwrap();
        janitor.disarm();
        assert!(
            sleeper.try_wait().unwrap().is_none(),
            "sleep must still run"
        );
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
    }
}
