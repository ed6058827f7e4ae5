//! `proxypool probe URL`: one GET, exit 0 on a 2xx answer and 1 on anything else (no
//! answer within the timeout, a refused connection, another status), with the body on
//! standard output and the reason on standard error.
//!
//! Why it exists: the container image ships the binary and CA certificates only, no curl
//! or wget, yet Docker's `HEALTHCHECK` runs a command inside the container. The probe uses
//! the same one-request client as `extract`, so it adds no dependency. Over `https://` the
//! server is verified against the public roots, as `extract` does without `--ca`.

use crate::args::ProbeArgs;
use crate::failure::Failure;
use crate::http_client::{self, BaseUrl};
use hyper::Method;
use std::io::Write as _;
use std::time::Duration;

pub(crate) async fn run(args: ProbeArgs) -> Result<(), Failure> {
    let base = BaseUrl::parse(&args.url).map_err(Failure::config)?;
    // The URL's path is the base's prefix; a bare `http://host:port` asks for `/`.
    let path = if base.prefix.is_empty() { "/" } else { "" };
    let answer = http_client::send(
        &base,
        None,
        Method::GET,
        path,
        &[],
        None,
        Duration::from_secs(args.timeout.max(1)),
    )
    .await
    .map_err(Failure::runtime)?;
    let mut stdout = std::io::stdout();
    let _ = stdout.write_all(&answer.body);
    let _ = stdout.flush();
    if (200..300).contains(&answer.status) {
        Ok(())
    } else {
        Err(Failure::runtime(format!(
            "{} answered {}",
            args.url, answer.status
        )))
    }
}
