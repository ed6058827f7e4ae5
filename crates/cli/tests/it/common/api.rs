//! Calls to the client API as a real client makes them, with `curl`.
//!
//! Under load the API may answer `503 unavailable` with `Retry-After` (a store or quota
//! call that timed out): a real client waits what it is told and sends the request again.
//! [`call`] does that, within a bound, so a test asserts what the API does rather than how
//! loaded the machine was. [`call_once`] is for the tests that observe a 503 on purpose
//! (a store that is recovering) and poll it themselves.

use super::{curl, run};
use serde_json::Value;
use std::time::{Duration, Instant};

/// How long [`call`] keeps retrying a 503 in all.
const RETRY_FOR: Duration = Duration::from_secs(30);
/// The longest single wait, whatever `Retry-After` says.
const LONGEST_WAIT: Duration = Duration::from_secs(5);

/// One answer: its status (0 when nothing answered), its head with the header names in
/// lower case, and its body.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Answer {
    /// What `curl -i` (or `-D -`) printed: the answer's head, then its body.
    pub fn parse(out: &str) -> Answer {
        let mut rest = out;
        // An interim `100 Continue` head comes before the answer's own.
        while rest.starts_with("HTTP/1.1 100") {
            rest = rest.split_once("\r\n\r\n").map_or("", |(_, after)| after);
        }
        let (head, body) = rest.split_once("\r\n\r\n").unwrap_or((rest, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let head = head
            .lines()
            .map(|line| match line.split_once(':') {
                Some((key, value)) => format!("{}:{value}", key.to_ascii_lowercase()),
                None => line.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("\n");
        Answer {
            status,
            head,
            body: body.to_owned(),
        }
    }

    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }

    /// The value of the header `name` (lower case), if it was sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == name).then(|| value.trim())
        })
    }

    /// How long the API asked to wait before the same request, on a 503.
    pub fn retry_after(&self) -> Option<Duration> {
        if self.status != 503 {
            return None;
        }
        let secs: u64 = self.header("retry-after")?.parse().ok()?;
        Some(Duration::from_secs(secs).min(LONGEST_WAIT))
    }
}

/// `METHOD url` with `token` as the bearer and `body` as JSON, sent once.
pub fn call_once(method: &str, url: &str, token: Option<&str>, body: Option<&str>) -> Answer {
    let auth = token.map(|token| format!("Authorization: Bearer {token}"));
    let mut args = vec!["-i", "-X", method];
    if let Some(auth) = &auth {
        args.extend(["-H", auth.as_str()]);
    }
    if let Some(body) = body {
        args.extend(["-H", "Content-Type: application/json", "-d", body]);
    }
    args.push(url);
    let (code, out) = curl(&args);
    if code != 0 {
        return Answer {
            status: 0,
            head: String::new(),
            body: out,
        };
    }
    Answer::parse(&out)
}

/// [`call_once`], sent again after the wait a `503` with `Retry-After` names, for up to
/// 30 s; the last answer.
pub fn call(method: &str, url: &str, token: Option<&str>, body: Option<&str>) -> Answer {
    retrying(&format!("{method} {url}"), || {
        let answer = call_once(method, url, token, body);
        let wait = answer.retry_after();
        (answer, wait)
    })
}

/// Runs `attempt` until it asks for no wait (its second value) or the next wait would
/// pass [`RETRY_FOR`]; the last attempt's result.
pub fn retrying<T>(what: &str, mut attempt: impl FnMut() -> (T, Option<Duration>)) -> T {
    let started = Instant::now();
    loop {
        let (result, wait) = attempt();
        let Some(wait) = wait else {
            return result;
        };
        if started.elapsed() + wait > RETRY_FOR {
            return result;
        }
        eprintln!("{what}: unavailable (503), retrying after {wait:?}");
        // The wait the API asked for: it is the client's side of the protocol.
        std::thread::sleep(wait);
    }
}

/// The exit code of `proxypool extract` when the API answered 503.
const EXIT_UNAVAILABLE: i32 = 6;

/// Runs `proxypool ARGS` (a command that calls the API, such as `extract`) like
/// [`run`](super::run), and again after the wait it printed when the API answered 503
/// with `Retry-After` (exit code 6, "retry after Ns"), for up to 30 s; the last run's
/// (exit code, stdout, stderr).
pub fn run_retrying(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    retrying(&format!("proxypool {args:?}"), || {
        let (code, stdout, stderr) = run(args, env);
        let wait = stderr
            .split("(retry after ")
            .nth(1)
            .filter(|_| code == EXIT_UNAVAILABLE)
            .and_then(|rest| rest.split('s').next()?.parse().ok())
            .map(|secs| Duration::from_secs(secs).min(LONGEST_WAIT));
        ((code, stdout, stderr), wait)
    })
}
