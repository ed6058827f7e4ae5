//! [`Exchange`]: one request's account. It is created when the request is read, filled in
//! as the request goes (who, what, through which proxy, the answer), carried along to
//! where the request really ends (the last byte of a streamed response, a tunnel's close)
//! and accounted when dropped: the request histogram once (at the answer's head, or at the
//! end when there was none), the tunnel histogram for a tunnel, and one access-log line.
//!
//! Without the access log an exchange is a start time and a kind: nothing is copied or
//! allocated for a line nobody writes. With it, an exchange collects what its format
//! shows, the format being the one in force when the request was read: the JSON line's
//! upstream name and proxy id, squid's peer host and media type, the combined line's
//! `Referer` and `User-Agent`; nothing is formatted until the line is written.

use super::line::Line;
use super::sink::AccessLog;
use super::text::{Peer, TextLine, protocol, refusal_tag, url_as_logged};
use crate::config::AccessLogFormat;
use crate::refusal::Refusal;
use http::header::{self, HeaderMap};
use http::{Method, Uri};
use proxypool_proto::TargetAddr;
use std::borrow::Cow;
use std::fmt::Display;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime};

/// What kind of request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Http,
    Connect,
    Socks5,
    /// A request inside an inspected `CONNECT` (`crate::inspection`): forwarded like a
    /// plain one, over TLS to the origin.
    Https,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Http => "http",
            Kind::Connect => "connect",
            Kind::Socks5 => "socks5",
            Kind::Https => "https",
        }
    }

    fn is_tunnel(self) -> bool {
        matches!(self, Kind::Connect | Kind::Socks5)
    }

    /// A forwarded request, whose text line shows its URL.
    fn is_forwarded(self) -> bool {
        matches!(self, Kind::Http | Kind::Https)
    }
}

/// The SOCKS5 reply of an opened tunnel.
const SOCKS_SUCCEEDED: u8 = 0;

/// What only a line needs; boxed, and made only while the access log is on.
#[derive(Debug)]
struct Fields {
    /// The format in force when the request was read: what is collected is its fields.
    format: AccessLogFormat,
    time: SystemTime,
    source: SocketAddr,
    client: Option<String>,
    /// A standard method is a constant: nothing is copied for it.
    method: Option<Method>,
    /// The text formats' URL of a plain request (any other target is `parsed`).
    target: Option<String>,
    /// The target as the gateway parsed it (an address is copied without formatting:
    /// the line formats it when it is written).
    parsed: Option<TargetAddr>,
    /// The request's URI as the client wrote it (its parts shared with the request, not
    /// copied): a forwarded request's path in JSON, and the target until the gateway
    /// parsed its own.
    requested: Option<Uri>,
    /// JSON only: the upstream's name and the proxy's id.
    upstream: Option<String>,
    proxy: Option<String>,
    status: Option<u16>,
    socks_reply: Option<u8>,
    code: Option<&'static str>,
    attempts: u32,
    bytes_up: u64,
    bytes_down: u64,
    /// A streamed request body's count, read when the exchange ends.
    uploaded: Option<Arc<AtomicU64>>,
    /// What only the text formats show (`None` in JSON).
    text: Option<TextFields>,
}

/// The text formats' own fields.
#[derive(Debug, Default)]
struct TextFields {
    /// The request line's protocol.
    protocol: Option<&'static str>,
    /// squid's tag of the refusal, when refused.
    refused: Option<&'static str>,
    /// SOCKS5: the HTTP status of the refusal (the HTTP listener's answer to the same).
    refusal_status: Option<u16>,
    /// squid: the proxy that carried the request (its address; no string made for an IP).
    peer: Option<TargetAddr>,
    /// squid: the response's `Content-Type`.
    content_type: Option<Box<[u8]>>,
    /// combined: the request's `Referer` and `User-Agent`.
    referer: Option<Box<[u8]>>,
    user_agent: Option<Box<[u8]>>,
}

/// One request's account (see the module docs); inert once handed over or forgotten.
#[derive(Debug)]
pub(crate) struct Exchange {
    log: Option<Arc<AccessLog>>,
    kind: Kind,
    started: Instant,
    /// The request histogram was recorded (the answer's head went out).
    answered: bool,
    tunnel_started: Option<Instant>,
    fields: Option<Box<Fields>>,
}

impl Exchange {
    /// A request of `kind` from `source`, read now.
    pub(crate) fn start(log: &Arc<AccessLog>, kind: Kind, source: SocketAddr) -> Exchange {
        let fields = log.enabled().then(|| {
            let format = log.format();
            Box::new(Fields {
                format,
                time: SystemTime::now(),
                source,
                client: None,
                method: None,
                target: None,
                parsed: None,
                requested: None,
                upstream: None,
                proxy: None,
                status: None,
                socks_reply: None,
                code: None,
                attempts: 0,
                bytes_up: 0,
                bytes_down: 0,
                uploaded: None,
                text: (format != AccessLogFormat::Json).then(TextFields::default),
            })
        });
        Exchange {
            log: Some(Arc::clone(log)),
            kind,
            started: Instant::now(),
            answered: false,
            tunnel_started: None,
            fields,
        }
    }

    /// An exchange that accounts nothing (what a handed-over one leaves behind).
    pub(crate) fn inert() -> Exchange {
        Exchange {
            log: None,
            kind: Kind::Http,
            started: Instant::now(),
            answered: true,
            tunnel_started: None,
            fields: None,
        }
    }

    /// Moves the account out, to where the request ends (a response body, a tunnel
    /// task), leaving an inert one here.
    pub(crate) fn hand_over(&mut self) -> Exchange {
        std::mem::replace(self, Exchange::inert())
    }

    /// The connection ended before it made a request (a SOCKS5 handshake that broke off):
    /// nothing to account.
    pub(crate) fn forget(mut self) {
        self.log = None;
    }

    /// The client's address when it is not the connection's: a fleet hop's request, whose
    /// client connected to the relaying member.
    pub(crate) fn source(&mut self, source: SocketAddr) {
        if let Some(fields) = &mut self.fields {
            fields.source = source;
        }
    }

    pub(crate) fn client(&mut self, client: &impl ToString) {
        if let Some(fields) = &mut self.fields {
            fields.client = Some(client.to_string());
        }
    }

    /// The request's head as the client wrote it: its method, and its target as its URI
    /// names it (`host:port`, the port from the scheme when none is written; in the text
    /// formats a plain request's URL), before the gateway parsed it.
    pub(crate) fn request<B>(&mut self, request: &http::Request<B>) {
        let Some(fields) = &mut self.fields else {
            return;
        };
        fields.method = Some(request.method().clone());
        let uri = request.uri();
        if let Some(text) = &mut fields.text {
            text.protocol = Some(protocol(request.version()));
            if fields.format == AccessLogFormat::Combined {
                let copy = |name| request.headers().get(name).map(|v| v.as_bytes().into());
                text.referer = copy(header::REFERER);
                text.user_agent = copy(header::USER_AGENT);
            }
            if self.kind.is_forwarded() {
                fields.target = Some(url_as_logged(uri));
                return;
            }
        }
        // Formatted only if the line is written and the gateway never parsed a target.
        fields.requested = Some(uri.clone());
    }

    /// The target as the gateway parsed it (canonical `host:port`). A text line keeps a
    /// plain request's URL instead.
    pub(crate) fn target(&mut self, target: &TargetAddr) {
        if let Some(fields) = &mut self.fields
            && !(fields.text.is_some() && self.kind.is_forwarded())
        {
            fields.parsed = Some(target.clone());
        }
    }

    /// The proxy that carried the request (the last one tried: its upstream, its id and
    /// its address) and how many were tried.
    pub(crate) fn routed(
        &mut self,
        upstream: &impl ToString,
        proxy: &impl ToString,
        address: &TargetAddr,
        attempts: u32,
    ) {
        if let Some(fields) = &mut self.fields {
            fields.attempts = attempts;
            match fields.format {
                AccessLogFormat::Json => {
                    fields.upstream = Some(upstream.to_string());
                    fields.proxy = Some(proxy.to_string());
                }
                AccessLogFormat::Squid => {
                    if let Some(text) = &mut fields.text {
                        text.peer = Some(address.clone());
                    }
                }
                AccessLogFormat::Combined => {}
            }
        }
    }

    /// The response's head (squid shows its media type).
    pub(crate) fn response_headers(&mut self, headers: &HeaderMap) {
        if let Some(fields) = &mut self.fields
            && fields.format == AccessLogFormat::Squid
            && let Some(text) = &mut fields.text
        {
            text.content_type = headers
                .get(header::CONTENT_TYPE)
                .map(|value| value.as_bytes().into());
        }
    }

    /// The answer's head goes out with `status` (HTTP) now.
    pub(crate) fn answered(&mut self, status: u16) {
        if let Some(fields) = &mut self.fields {
            fields.status = Some(status);
        }
        self.record_request();
    }

    /// The SOCKS5 reply `reply` goes out now.
    pub(crate) fn replied(&mut self, reply: u8) {
        if let Some(fields) = &mut self.fields {
            fields.socks_reply = Some(reply);
        }
        self.record_request();
    }

    /// The gateway refused the request: its code, and the status or reply the client gets.
    pub(crate) fn refused(&mut self, refusal: &Refusal) {
        self.note_refusal(refusal);
        match self.kind {
            Kind::Socks5 => self.replied(refusal.socks_reply()),
            Kind::Http | Kind::Connect | Kind::Https => self.answered(refusal.status()),
        }
    }

    /// The gateway refused the credentials (SOCKS5's username/password step, which has no
    /// room for a reply code): the request ends here.
    pub(crate) fn refused_at_credentials(mut self, refusal: &Refusal) {
        self.note_refusal(refusal);
        self.record_request();
    }

    fn note_refusal(&mut self, refusal: &Refusal) {
        if let Some(fields) = &mut self.fields {
            fields.code = Some(refusal.code());
            if let Some(text) = &mut fields.text {
                text.refused = Some(refusal_tag(refusal, self.kind.is_tunnel()));
                text.refusal_status = Some(refusal.status());
            }
        }
    }

    /// The tunnel is up: from now on its life is measured.
    pub(crate) fn tunnel_started(&mut self) {
        self.tunnel_started = Some(Instant::now());
    }

    /// Payload relayed: `up` from the client toward the target, `down` back.
    pub(crate) fn bytes(&mut self, up: u64, down: u64) {
        if let Some(fields) = &mut self.fields {
            fields.bytes_up += up;
            fields.bytes_down += down;
        }
    }

    /// A count for the request body's bytes as it streams upstream, while a line is
    /// being collected.
    pub(crate) fn upload_meter(&mut self) -> Option<Arc<AtomicU64>> {
        let fields = self.fields.as_mut()?;
        Some(Arc::clone(
            fields
                .uploaded
                .get_or_insert_with(|| Arc::new(AtomicU64::new(0))),
        ))
    }

    fn record_request(&mut self) {
        if self.answered {
            return;
        }
        self.answered = true;
        if let Some(log) = &self.log {
            log.request_seconds[self.kind as usize].record(self.started.elapsed().as_secs_f64());
        }
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        // A request that ends without an answer's head is measured to its end.
        self.record_request();
        let Some(log) = self.log.take() else {
            return;
        };
        if let Some(started) = self.tunnel_started {
            let tunnel = match self.kind {
                Kind::Socks5 => 1,
                Kind::Http | Kind::Connect | Kind::Https => 0,
            };
            log.tunnel_seconds[tunnel].record(started.elapsed().as_secs_f64());
        }
        let Some(mut fields) = self.fields.take() else {
            return;
        };
        if let Some(uploaded) = &fields.uploaded {
            fields.bytes_up += uploaded.load(Ordering::Relaxed);
        }
        // Served requests one in `sample_one_in`; refusals within their own budget, asked
        // before anything is formatted (a refusal flood costs no line it cannot keep).
        let refusal = fields.code.is_some();
        let kept = if refusal {
            log.refusal_admitted()
        } else {
            log.sampled()
        };
        if !kept {
            return;
        }
        let push = |line: Vec<u8>| {
            if refusal {
                log.push_refusal(line);
            } else {
                log.push(line);
            }
        };
        let elapsed = self.started.elapsed();
        // A text line's URL, or the parsed target, or the one the client wrote.
        let requested_target;
        let target: Option<&dyn Display> = match (&fields.target, &fields.parsed) {
            (Some(text), _) => Some(text),
            (None, Some(parsed)) => Some(parsed),
            (None, None) => {
                requested_target = fields.requested.as_ref().and_then(target_as_written);
                requested_target.as_ref().map(|text| text as &dyn Display)
            }
        };
        let method = fields.method.as_ref().map(Method::as_str);
        let Some(text) = &fields.text else {
            let line = Line {
                time: fields.time,
                kind: self.kind.label(),
                source: fields.source,
                client: fields.client.as_deref(),
                method,
                target,
                path: fields
                    .requested
                    .as_ref()
                    .filter(|_| self.kind.is_forwarded())
                    .map(Uri::path),
                upstream: fields.upstream.as_deref(),
                proxy: fields.proxy.as_deref(),
                status: fields.status,
                socks_reply: fields.socks_reply,
                code: fields.code,
                attempts: fields.attempts,
                bytes_up: fields.bytes_up,
                bytes_down: fields.bytes_down,
                duration_ms: elapsed.as_secs_f64() * 1000.0,
            };
            push(line.to_bytes());
            return;
        };
        let (method, protocol, status) = match self.kind {
            Kind::Http | Kind::Connect | Kind::Https => {
                (method, text.protocol.unwrap_or("HTTP/1.1"), fields.status)
            }
            // No request line and no HTTP status: what stands for them (module docs).
            Kind::Socks5 => (
                Some("SOCKS5"),
                "SOCKS/5",
                match fields.socks_reply {
                    Some(SOCKS_SUCCEEDED) => Some(200),
                    _ => text.refusal_status,
                },
            ),
        };
        // A plain request's URL is the text already kept; only another target is made one.
        let url: Option<Cow<'_, str>> = match &fields.target {
            Some(text) => Some(Cow::Borrowed(text)),
            None => target.map(|target| Cow::Owned(target.to_string())),
        };
        let line = TextLine {
            started: fields.time,
            elapsed,
            source: fields.source.ip(),
            client: fields.client.as_deref(),
            method,
            url: url.as_deref(),
            protocol,
            tag: TextLine::tag(text.refused, text.peer.is_some(), self.kind.is_tunnel()),
            status,
            bytes: fields.bytes_down,
            peer: text.peer.as_ref().map(|peer| match peer {
                TargetAddr::Ip(addr) => Peer::Ip(addr.ip()),
                TargetAddr::Domain(name, _) => Peer::Name(name),
            }),
            content_type: text.content_type.as_deref(),
            referer: text.referer.as_deref(),
            user_agent: text.user_agent.as_deref(),
        };
        push(if fields.format == AccessLogFormat::Combined {
            line.combined()
        } else {
            line.squid()
        });
    }
}

/// `host:port` of a URI as the client wrote it, the port from the scheme when none is
/// written (a refused request's target, before the gateway parsed one).
fn target_as_written(uri: &Uri) -> Option<String> {
    let host = uri.host()?;
    let port = uri.port_u16().or(match uri.scheme_str() {
        Some("http") => Some(80),
        Some("https") => Some(443),
        _ => None,
    });
    Some(match port {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    })
}
