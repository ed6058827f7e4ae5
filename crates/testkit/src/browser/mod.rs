//! Headless Chromium driven over the DevTools protocol, for the dashboard's browser tests
//! and Chromium through the gateway.
//!
//! [`Browser::launch`] starts `chromium --headless=new` with a private profile in a scratch
//! directory and `--remote-debugging-port=0`, reads the `DevTools listening on ws://…` line
//! from its stderr, opens one page and attaches to it (a flat session). Tests then
//! navigate, evaluate JavaScript in the page, poll a condition with a deadline and take
//! screenshots. Dropping the guard kills the browser and removes the profile. The DevTools
//! connection is `tungstenite`'s blocking WebSocket over a plain loopback `TcpStream`.
//!
//! [`Browser::launch_with`] adds switches and environment ([`LaunchOptions`]: a proxy, the
//! keys to trust, a private `HOME` for an NSS database). DevTools events arrive between the
//! answers a call waits for; [`Browser::on_event`] installs a handler that sees each one
//! and may answer it with calls of its own, sent at once on the event's session, so a
//! browser stopped at an event (a paused request, a proxy's 407) goes on while `navigate`
//! or `wait_for` waits. [`Browser::answer_proxy_auth`] ([`ProxyAuth`]) is that for a
//! proxy's credentials. `trust` makes Chromium trust a test's certificates: a key's pin
//! ([`spki_pin`]) or a CA in an NSS database ([`trust_ca_in_nss`], with `certutil`).
//!
//! The binary: `PROXYPOOL_TEST_CHROMIUM`, else `chromium`, `chromium-browser`,
//! `google-chrome` on `PATH`. Without one, [`browser_or_skip`] skips with a banner (and
//! fails under `CI=true`), like the server guards.

use crate::error::{Result, TestkitError};
use crate::scratch::ScratchDir;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tungstenite::protocol::WebSocketConfig;
use tungstenite::{Message, WebSocket};

mod events;
mod trust;

use events::EventHandler;
pub use events::{Event, EventCalls, ProxyAuth, ProxyAuthAnswers};
pub use trust::{CERTUTIL_ENV, spki_pin, trust_ca_in_nss, trust_ca_in_nss_or_skip};

/// Names the browser binary explicitly (skips the `PATH` search).
pub const CHROMIUM_ENV: &str = "PROXYPOOL_TEST_CHROMIUM";
const CANDIDATES: &[&str] = &["chromium", "chromium-browser", "google-chrome"];
/// How long one DevTools call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest message accepted (a full-page screenshot in base64 fits easily).
const MAX_MESSAGE: usize = 64 << 20;

/// What [`Browser::launch_with`] adds to the defaults.
#[derive(Debug, Clone, Default)]
pub struct LaunchOptions {
    /// Switches after the default ones (`--proxy-server=…`,
    /// `--ignore-certificate-errors-spki-list=…`).
    pub args: Vec<String>,
    /// Environment of the browser beyond the test's own (`HOME` for an NSS database).
    pub env: Vec<(OsString, OsString)>,
}

/// A running headless browser with one page attached.
pub struct Browser {
    child: Child,
    socket: WebSocket<TcpStream>,
    session: String,
    next_id: u64,
    handler: Option<EventHandler>,
    /// Calls a handler sent, by id: their answers are read like events, and an error in
    /// one fails the call being waited for (a handler's mistake must not pass unseen).
    handler_calls: HashMap<u64, String>,
    _profile: ScratchDir,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser")
            .field("pid", &self.child.id())
            .field("session", &self.session)
            .field("handles_events", &self.handler.is_some())
            .finish_non_exhaustive()
    }
}

fn io_error(context: &str) -> impl FnOnce(std::io::Error) -> TestkitError + '_ {
    move |source| TestkitError::io(context.to_owned(), source)
}

fn socket_error(error: tungstenite::Error) -> io::Error {
    match error {
        tungstenite::Error::Io(error) => error,
        other => io::Error::other(other),
    }
}

/// Connects to the browser's `ws://127.0.0.1:PORT/devtools/browser/…` and completes the
/// opening handshake; reads time out after `timeout`.
fn connect(url: &str, timeout: Duration) -> io::Result<WebSocket<TcpStream>> {
    let parsed = url::Url::parse(url).map_err(io::Error::other)?;
    let host = parsed.host_str().unwrap_or_default();
    let stream = TcpStream::connect((host, parsed.port_or_known_default().unwrap_or(80)))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_nodelay(true)?;
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE));
    match tungstenite::client::client_with_config(url, stream, Some(config)) {
        Ok((socket, _response)) => Ok(socket),
        Err(tungstenite::HandshakeError::Failure(error)) => Err(socket_error(error)),
        Err(tungstenite::HandshakeError::Interrupted(_)) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "the DevTools handshake did not complete",
        )),
    }
}

/// The next text message (pings are answered by the socket). A read timeout is `TimedOut`
/// / `WouldBlock`; a close from the browser is `ConnectionAborted`.
fn read_text(socket: &mut WebSocket<TcpStream>) -> io::Result<String> {
    loop {
        match socket.read().map_err(socket_error)? {
            Message::Text(text) => return Ok(text.as_str().to_owned()),
            Message::Binary(bytes) => {
                return String::from_utf8(bytes.to_vec())
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8"));
            }
            Message::Close(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "the browser closed the DevTools connection",
                ));
            }
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
        }
    }
}

fn failed(output: String) -> TestkitError {
    TestkitError::CommandFailed {
        program: "chromium".into(),
        status: "DevTools".into(),
        output,
    }
}

/// Where the browser binary is.
pub fn chromium_binary() -> Result<PathBuf> {
    if let Some(explicit) = std::env::var_os(CHROMIUM_ENV) {
        return Ok(PathBuf::from(explicit));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in CANDIDATES {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Ok(candidate);
            }
        }
    }
    Err(TestkitError::BinaryNotFound {
        binary: "chromium",
        searched: format!("${CHROMIUM_ENV}, then {} on PATH", CANDIDATES.join(", ")),
    })
}

impl Browser {
    /// Starts the browser and opens a blank page of `width` x `height` CSS pixels.
    pub fn launch(width: u32, height: u32) -> Result<Browser> {
        Self::launch_with(width, height, &LaunchOptions::default())
    }

    /// [`launch`](Self::launch) with `options`' switches and environment.
    pub fn launch_with(width: u32, height: u32, options: &LaunchOptions) -> Result<Browser> {
        let binary = chromium_binary()?;
        let profile = ScratchDir::create(&std::env::temp_dir(), "chromium")?;
        let mut child = Command::new(&binary)
            .args([
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1",
                &format!("--window-size={width},{height}"),
                "--hide-scrollbars",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(&options.args)
            .envs(options.env.iter().map(|(k, v)| (k, v)))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io_error("starting chromium"))?;
        let stderr = child.stderr.take().expect("stderr is piped");
        let (found, url) = mpsc::channel();
        // Keeps draining stderr for the browser's whole life: a full pipe would stall it.
        std::thread::spawn(move || {
            let mut found = Some(found);
            let mut seen = Vec::new();
            for line in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
                if let Some(url) = line.split("DevTools listening on ").nth(1)
                    && let Some(found) = found.take()
                {
                    let _ = found.send(Ok(url.trim().to_owned()));
                } else if found.is_some() && seen.len() < 40 {
                    seen.push(line);
                }
            }
            if let Some(found) = found {
                let _ = found.send(Err(seen.join("\n")));
            }
        });
        let url = match url.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(url)) => url,
            Ok(Err(output)) => {
                let _ = child.kill();
                return Err(failed(format!("exited before DevTools listened: {output}")));
            }
            Err(_) => {
                let _ = child.kill();
                return Err(failed("no DevTools line within 30 s".into()));
            }
        };
        let socket = connect(&url, CALL_TIMEOUT).map_err(io_error("DevTools socket"))?;
        let mut browser = Browser {
            child,
            socket,
            session: String::new(),
            next_id: 0,
            handler: None,
            handler_calls: HashMap::new(),
            _profile: profile,
        };
        let target =
            browser.call_browser("Target.createTarget", json!({ "url": "about:blank" }))?;
        let target_id = target["targetId"].as_str().unwrap_or_default().to_owned();
        let attached = browser.call_browser(
            "Target.attachToTarget",
            json!({ "targetId": target_id, "flatten": true }),
        )?;
        browser.session = attached["sessionId"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        browser.call(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": false }),
        )?;
        browser.call("Page.enable", json!({}))?;
        browser.call("Runtime.enable", json!({}))?;
        Ok(browser)
    }

    fn send(&mut self, session: Option<String>, method: &str, params: Value) -> Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = Value::String(session);
        }
        self.socket
            .send(Message::text(message.to_string()))
            .map_err(|error| io_error("DevTools send")(socket_error(error)))?;
        let deadline = Instant::now() + CALL_TIMEOUT;
        loop {
            if Instant::now() > deadline {
                return Err(failed(format!(
                    "{method}: no answer within {CALL_TIMEOUT:?}"
                )));
            }
            let text = read_text(&mut self.socket).map_err(io_error("DevTools read"))?;
            let reply: Value = serde_json::from_str(&text)
                .map_err(|e| failed(format!("{method}: undecodable reply: {e}")))?;
            // Events and other answers are not what this call waits for.
            if reply["id"].as_u64() != Some(id) {
                self.dispatch(reply)?;
                continue;
            }
            if let Some(error) = reply.get("error") {
                return Err(failed(format!("{method}: {error}")));
            }
            return Ok(reply["result"].clone());
        }
    }

    /// Hands an event to the handler and sends what it answers; checks the answer to a
    /// call a handler sent.
    fn dispatch(&mut self, message: Value) -> Result<()> {
        if let Some(id) = message["id"].as_u64() {
            if let Some(method) = self.handler_calls.remove(&id)
                && let Some(error) = message.get("error")
            {
                return Err(failed(format!("{method} (answering an event): {error}")));
            }
            return Ok(());
        }
        let Some(handler) = self.handler.as_mut() else {
            return Ok(());
        };
        let event = Event {
            method: message["method"].as_str().unwrap_or_default().to_owned(),
            params: message["params"].clone(),
            session: message["sessionId"].as_str().map(str::to_owned),
        };
        for (method, params) in handler(&event) {
            self.next_id += 1;
            let mut call = json!({ "id": self.next_id, "method": method, "params": params });
            if let Some(session) = &event.session {
                call["sessionId"] = Value::String(session.clone());
            }
            self.socket
                .send(Message::text(call.to_string()))
                .map_err(|error| io_error("DevTools send")(socket_error(error)))?;
            self.handler_calls.insert(self.next_id, method);
        }
        Ok(())
    }

    /// Sends every event from now on to `handler`; the calls it returns are sent on the
    /// event's session without waiting for their answers (an error answer fails the call
    /// then being waited for). Replaces an earlier handler.
    pub fn on_event(&mut self, handler: impl FnMut(&Event) -> EventCalls + Send + 'static) {
        self.handler = Some(Box::new(handler));
    }

    /// Answers a proxy's `407` with `username` and `password` ([`ProxyAuth`]) and turns
    /// the Fetch domain on with `handleAuthRequests`. Replaces an earlier event handler.
    pub fn answer_proxy_auth(
        &mut self,
        username: &str,
        password: &str,
    ) -> Result<ProxyAuthAnswers> {
        let mut auth = ProxyAuth::new(username, password);
        let answers = auth.answers();
        self.on_event(move |event| auth.answer(event));
        self.call("Fetch.enable", json!({ "handleAuthRequests": true }))?;
        Ok(answers)
    }

    fn call_browser(&mut self, method: &str, params: Value) -> Result<Value> {
        self.send(None, method, params)
    }

    /// One DevTools call on the page.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        let session = self.session.clone();
        self.send(Some(session), method, params)
    }

    /// Loads `url` and waits until the document has finished loading.
    pub fn navigate(&mut self, url: &str) -> Result<()> {
        let reply = self.call("Page.navigate", json!({ "url": url }))?;
        if let Some(error) = reply.get("errorText").and_then(Value::as_str) {
            return Err(failed(format!("navigating to {url}: {error}")));
        }
        self.wait_for(
            "document.readyState === 'complete'",
            Duration::from_secs(15),
        )
        .map(|_| ())
    }

    /// Evaluates `expression` in the page (promises awaited) and returns its value.
    pub fn eval(&mut self, expression: &str) -> Result<Value> {
        let reply = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
        )?;
        if let Some(exception) = reply.get("exceptionDetails") {
            return Err(failed(format!("{expression}: {exception}")));
        }
        Ok(reply["result"]["value"].clone())
    }

    /// Polls `expression` every 50 ms until it is truthy (not null, false, 0 or "") and
    /// returns that value; an error after `timeout`.
    pub fn wait_for(&mut self, expression: &str, timeout: Duration) -> Result<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let value = self.eval(expression)?;
            let truthy = match &value {
                Value::Null => false,
                Value::Bool(b) => *b,
                Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if truthy {
                return Ok(value);
            }
            if Instant::now() > deadline {
                return Err(failed(format!(
                    "still not true after {timeout:?}: {expression} (last: {value})"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Saves a PNG of the page (the whole page when `full_page`) to `path`.
    pub fn screenshot(&mut self, path: &Path, full_page: bool) -> Result<()> {
        let shot = self.call(
            "Page.captureScreenshot",
            json!({ "format": "png", "captureBeyondViewport": full_page }),
        )?;
        let data = shot["data"].as_str().unwrap_or_default();
        let bytes = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, data)
            .map_err(|e| failed(format!("screenshot: {e}")))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io_error("creating the screenshot directory"))?;
        }
        std::fs::write(path, bytes).map_err(io_error("writing the screenshot"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A browser, or `None` (after a loud banner) when no Chromium is installed; panics under
/// `CI=true` or when the browser fails to start.
pub fn browser_or_skip(width: u32, height: u32) -> Option<Browser> {
    browser_or_skip_with(width, height, &LaunchOptions::default())
}

/// [`browser_or_skip`] launched with `options`.
pub fn browser_or_skip_with(width: u32, height: u32, options: &LaunchOptions) -> Option<Browser> {
    crate::skip::skip_or_fail(
        "chromium",
        CHROMIUM_ENV,
        Browser::launch_with(width, height, options),
    )
}
