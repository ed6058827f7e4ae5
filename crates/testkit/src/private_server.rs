//! [`PrivateServer`]: what the Redis and PostgreSQL guards share when they drive their
//! server: a launch on a free port (a fresh one when another process took ours between
//! probe and bind), a stop, a launch again on the same port, and whether it runs.

use crate::error::Result;
use crate::process::{ServerProcess, StartFailure, free_loopback_port};
use std::time::Duration;

/// How many fresh ports to try when someone else grabs ours between probe and bind.
pub(crate) const PORT_ATTEMPTS: usize = 3;

/// A restart must keep its port: while another socket holds it (a client's outgoing
/// connection may be given the same ephemeral port), try again this often, this long apart.
const SAME_PORT_ATTEMPTS: usize = 10;
const SAME_PORT_PAUSE: Duration = Duration::from_millis(200);

/// A private server as its guard drives it: launched on a free port, stopped, and launched
/// again on the same port. Only `launch` differs between servers.
pub(crate) trait PrivateServer {
    /// Starts the server on `port` and waits until it answers.
    fn launch(&mut self, port: u16) -> std::result::Result<(), StartFailure>;

    /// The server's process while it runs.
    fn process_mut(&mut self) -> &mut Option<ServerProcess>;

    /// Launches on a free port, taking a fresh one when the server found ours taken.
    fn launch_on_free_port(&mut self) -> Result<u16> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = free_loopback_port()?;
            match self.launch(port) {
                Ok(()) => return Ok(port),
                Err(failure) if failure.port_taken && attempt < PORT_ATTEMPTS => continue,
                Err(failure) => return Err(failure.error),
            }
        }
    }

    /// Stops the server with `signal` (SIGKILL after `timeout`); stopping twice is fine.
    fn stop(&mut self, signal: &str, timeout: Duration) {
        if let Some(mut server) = self.process_mut().take() {
            server.stop(signal, timeout);
        }
    }

    /// Launches the server again on `port`; a no-op while it runs. While another socket
    /// holds the port, tries again for a bounded time.
    fn start_again(&mut self, port: u16) -> Result<()> {
        if let Some(server) = self.process_mut() {
            if server.exited().is_none() {
                return Ok(());
            }
            *self.process_mut() = None;
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.launch(port) {
                Ok(()) => return Ok(()),
                Err(failure) if failure.port_taken && attempt < SAME_PORT_ATTEMPTS => {
                    std::thread::sleep(SAME_PORT_PAUSE);
                }
                Err(failure) => return Err(failure.error),
            }
        }
    }

    /// Whether the server's process is alive.
    fn is_running(&mut self) -> bool {
        self.process_mut()
            .as_mut()
            .is_some_and(|server| server.exited().is_none())
    }
}
