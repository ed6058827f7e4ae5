//! The two text shapes of an access-log line, for the tools that already read them:
//! squid's native `access.log` line ([`TextLine::squid`]) and the Apache/NCSA combined
//! format ([`TextLine::combined`]).
//!
//! squid (`logformat squid`: `%ts.%03tu %6tr %>a %Ss/%03>Hs %<st %rm %ru %[un %Sh/%<a %mt`):
//! the time the request ended (Unix seconds with milliseconds), its duration in
//! milliseconds, the client's IP, the result tag and status ([`refusal_tag`] and
//! [`TextLine::tag`]), the bytes sent to the client, the method, the URL, the client id,
//! `FIRSTUP_PARENT/` and the upstream proxy's host (`HIER_NONE/-` when no proxy carried
//! it), and the response's media type. Fields are separated by single spaces, so every
//! field is percent-encoded where it could hold a space, a control character, a quote or
//! a byte outside ASCII ([`squid_token`]), as squid encodes its URLs and user names.
//!
//! combined (`%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i"`): the client's IP,
//! `-`, the client id, the time the request was read (UTC), the request line, the status,
//! the bytes sent to the client (`-` for none), the request's `Referer` and `User-Agent`.
//! Quoted fields escape as Apache does: `\"`, `\\`, C-style whitespace (`\n`, `\t`, ...)
//! and `\xhh` for every other byte that is not printable ASCII; unquoted ones also escape a
//! space ([`combined_escape`]). A URL carrying a quote or a newline cannot end a field or a
//! line early.
//!
//! SOCKS5 has no HTTP status or request line: its method is `SOCKS5`, its protocol
//! `SOCKS/5`, and its status the one the HTTP listener gives for the same outcome (200 for
//! a tunnel opened, the refusal's status otherwise), so both listeners count alike.

use crate::refusal::Refusal;
use std::io::Write;
use std::net::IpAddr;
use std::time::{Duration, SystemTime};

/// The fields a text line shows, borrowed from the finished exchange.
#[derive(Debug)]
pub(crate) struct TextLine<'a> {
    /// When the request was read.
    pub started: SystemTime,
    /// From then to the last byte of the answer or the tunnel's close.
    pub elapsed: Duration,
    pub source: IpAddr,
    pub client: Option<&'a str>,
    pub method: Option<&'a str>,
    /// A plain request's URL, a tunnel's `host:port`.
    pub url: Option<&'a str>,
    /// The request line's protocol (`HTTP/1.1`, `SOCKS/5`).
    pub protocol: &'static str,
    /// The squid result tag ([`TextLine::tag`] builds it).
    pub tag: &'static str,
    /// The HTTP status, or what stands for it (SOCKS5).
    pub status: Option<u16>,
    /// Bytes sent to the client (a response's body, a tunnel's bytes toward the client).
    pub bytes: u64,
    /// The upstream proxy's host (squid's peer).
    pub peer: Option<Peer<'a>>,
    pub content_type: Option<&'a [u8]>,
    pub referer: Option<&'a [u8]>,
    pub user_agent: Option<&'a [u8]>,
}

/// The upstream proxy's host, as squid shows a peer (no port).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Peer<'a> {
    Ip(IpAddr),
    Name(&'a str),
}

/// squid's result tag of a refusal: `TCP_DENIED` for what the client may not do, the
/// forwarding tag for an upstream that failed (the request went out), `NONE` for what the
/// gateway could not serve without forwarding anything.
pub(crate) fn refusal_tag(refusal: &Refusal, tunnel: bool) -> &'static str {
    match refusal {
        Refusal::AuthRequired
        | Refusal::BadSelector(_)
        | Refusal::Forbidden(_)
        | Refusal::DestinationDenied(_)
        | Refusal::RateLimited { .. }
        | Refusal::TooManyConnections => "TCP_DENIED",
        Refusal::UpstreamFailed { .. } | Refusal::OriginCertificateInvalid { .. } => {
            forwarded_tag(tunnel)
        }
        Refusal::BadRequest(_)
        | Refusal::NoEligibleProxy
        | Refusal::NoLeasedProxies
        | Refusal::Stale
        | Refusal::DomainCoolingDown { .. }
        | Refusal::SessionTableFull
        | Refusal::Unavailable
        | Refusal::FleetUnavailable => "NONE",
    }
}

fn forwarded_tag(tunnel: bool) -> &'static str {
    if tunnel { "TCP_TUNNEL" } else { "TCP_MISS" }
}

impl TextLine<'_> {
    /// The squid tag of a request the gateway did not refuse: `TCP_MISS` (plain HTTP) or
    /// `TCP_TUNNEL` once a proxy carried it, `NONE` when it ended before any did.
    pub(crate) fn tag(refused: Option<&'static str>, routed: bool, tunnel: bool) -> &'static str {
        match refused {
            Some(tag) => tag,
            None if routed => forwarded_tag(tunnel),
            None => "NONE",
        }
    }

    /// squid's native line, with its newline.
    pub(crate) fn squid(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        let ended = self.started + self.elapsed;
        let since = ended
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        // Writing to a Vec cannot fail.
        let _ = write!(
            out,
            "{:9}.{:03} {:6} {} {}/{:03} {} ",
            since.as_secs(),
            since.subsec_millis(),
            self.elapsed.as_millis(),
            self.source,
            self.tag,
            self.status.unwrap_or(0),
            self.bytes,
        );
        squid_token(&mut out, self.method.map(str::as_bytes));
        out.push(b' ');
        squid_token(&mut out, self.url.map(str::as_bytes));
        out.push(b' ');
        squid_token(&mut out, self.client.map(str::as_bytes));
        out.push(b' ');
        match self.peer {
            Some(Peer::Ip(ip)) => {
                let _ = write!(out, "FIRSTUP_PARENT/{ip}");
            }
            Some(Peer::Name(name)) => {
                out.extend_from_slice(b"FIRSTUP_PARENT/");
                squid_token(&mut out, Some(name.as_bytes()));
            }
            None => out.extend_from_slice(b"HIER_NONE/-"),
        }
        out.push(b' ');
        squid_token(&mut out, self.content_type.map(media_type));
        out.push(b'\n');
        out
    }

    /// The combined line, with its newline.
    pub(crate) fn combined(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        let _ = write!(out, "{} - ", self.source);
        match self.client {
            Some(client) => combined_escape(&mut out, client.as_bytes(), false),
            None => out.push(b'-'),
        }
        out.extend_from_slice(b" [");
        clf_time(&mut out, self.started);
        out.extend_from_slice(b"] \"");
        combined_escape(&mut out, self.method.unwrap_or("-").as_bytes(), true);
        out.push(b' ');
        combined_escape(&mut out, self.url.unwrap_or("-").as_bytes(), true);
        out.push(b' ');
        out.extend_from_slice(self.protocol.as_bytes());
        out.extend_from_slice(b"\" ");
        match self.status {
            Some(status) => {
                let _ = write!(out, "{status:03}");
            }
            None => out.push(b'-'),
        }
        // CLF writes `-`, not 0, for a response without a body.
        match self.bytes {
            0 => out.extend_from_slice(b" - \""),
            bytes => {
                let _ = write!(out, " {bytes} \"");
            }
        }
        combined_escape(&mut out, self.referer.unwrap_or(b"-"), true);
        out.extend_from_slice(b"\" \"");
        combined_escape(&mut out, self.user_agent.unwrap_or(b"-"), true);
        out.extend_from_slice(b"\"\n");
        out
    }
}

/// The request line's protocol as a log shows it.
pub(crate) fn protocol(version: http::Version) -> &'static str {
    match version {
        http::Version::HTTP_09 => "HTTP/0.9",
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_2 => "HTTP/2.0",
        http::Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/1.1",
    }
}

/// A plain request's URL for a text line: scheme, host, the port when written, and the
/// path; never the user information or the query, which can carry credentials and
/// tokens (squid leaves the query out by default for the same reason). A request
/// without a host is logged by its path.
pub(crate) fn url_as_logged(uri: &http::Uri) -> String {
    let path = uri.path();
    match (uri.scheme_str(), uri.host()) {
        (Some(scheme), Some(host)) => match uri.port_u16() {
            Some(port) => format!("{scheme}://{host}:{port}{path}"),
            None => format!("{scheme}://{host}{path}"),
        },
        _ => path.to_owned(),
    }
}

/// `text/html; charset=utf-8` → `text/html`: the parameters only lengthen the field.
fn media_type(value: &[u8]) -> &[u8] {
    let end = value.iter().position(|&b| b == b';').unwrap_or(value.len());
    value[..end].trim_ascii()
}

/// One space-free squid field: `-` when empty or absent, else the bytes with a space,
/// control characters, bytes outside ASCII and URL-unsafe characters (`"<>\^`{|}`)
/// percent-encoded, `%` itself left as it is (squid's own pass-through URL encoding).
fn squid_token(out: &mut Vec<u8>, value: Option<&[u8]>) {
    let value = value.unwrap_or_default();
    if value.is_empty() {
        out.push(b'-');
        return;
    }
    for &b in value {
        let unsafe_byte = b <= b' '
            || b >= 0x7f
            || matches!(
                b,
                b'"' | b'<' | b'>' | b'\\' | b'^' | b'`' | b'{' | b'|' | b'}'
            );
        if unsafe_byte {
            let _ = write!(out, "%{b:02X}");
        } else {
            out.push(b);
        }
    }
}

/// Apache's escaping of a log field: `"` and `\` behind a backslash, whitespace in its C
/// form, every other byte that is not printable ASCII as `\xhh`; in an unquoted field a
/// space too (`\x20`), which would otherwise split it.
fn combined_escape(out: &mut Vec<u8>, value: &[u8], quoted: bool) {
    for &b in value {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x0b => out.extend_from_slice(b"\\v"),
            0x0c => out.extend_from_slice(b"\\f"),
            b' ' if quoted => out.push(b),
            b' '..=b'~' if b != b' ' => out.push(b),
            _ => {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// `10/Oct/2000:13:55:36 +0000`: CLF's time, in UTC.
fn clf_time(out: &mut Vec<u8>, time: SystemTime) {
    let secs = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let (year, month, day) = civil_from_days(secs / 86_400);
    let of_day = secs % 86_400;
    let _ = write!(
        out,
        "{day:02}/{}/{year:04}:{:02}:{:02}:{:02} +0000",
        MONTHS[(month - 1) as usize],
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60,
    );
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for days on or after the epoch): `(year, month 1..=12, day 1..=31)`.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line<'a>() -> TextLine<'a> {
        TextLine {
            started: SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_428_800_123),
            elapsed: Duration::from_micros(1_234_567),
            source: "192.0.2.7".parse().unwrap(),
            client: Some("alice"),
            method: Some("GET"),
            url: Some("http://example.test/a"),
            protocol: "HTTP/1.1",
            tag: "TCP_MISS",
            status: Some(200),
            bytes: 512,
            peer: Some(Peer::Ip("203.0.113.9".parse().unwrap())),
            content_type: Some(b"text/html; charset=utf-8"),
            referer: None,
            user_agent: Some(b"curl/8.0"),
        }
    }

    fn text(bytes: Vec<u8>) -> String {
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn a_squid_line_has_squid_s_fields_in_squid_s_order() {
        assert_eq!(
            text(line().squid()),
            "1796428801.357   1234 192.0.2.7 TCP_MISS/200 512 GET http://example.test/a alice \
             FIRSTUP_PARENT/203.0.113.9 text/html\n"
        );
        let mut refused = line();
        refused.client = None;
        refused.status = None;
        refused.tag = "NONE";
        refused.peer = None;
        refused.content_type = None;
        refused.url = Some("");
        assert_eq!(
            text(refused.squid()),
            "1796428801.357   1234 192.0.2.7 NONE/000 512 GET - - HIER_NONE/- -\n"
        );
    }

    #[test]
    fn a_combined_line_has_the_ncsa_fields_and_the_time_the_request_was_read() {
        assert_eq!(
            text(line().combined()),
            "192.0.2.7 - alice [05/Dec/2026:00:00:00 +0000] \"GET http://example.test/a \
             HTTP/1.1\" 200 512 \"-\" \"curl/8.0\"\n"
        );
        let mut empty = line();
        empty.bytes = 0;
        empty.status = None;
        empty.client = None;
        empty.method = Some("SOCKS5");
        empty.url = None;
        empty.protocol = "SOCKS/5";
        assert_eq!(
            text(empty.combined()),
            "192.0.2.7 - - [05/Dec/2026:00:00:00 +0000] \"SOCKS5 - SOCKS/5\" - - \"-\" \
             \"curl/8.0\"\n"
        );
    }

    #[test]
    fn quotes_newlines_and_spaces_in_a_field_cannot_split_a_field_or_a_line() {
        let nasty = "http://x.test/a\"b c\nd\\e\u{1}é";
        let mut l = line();
        l.url = Some(nasty);
        l.client = Some("a b\"c");
        l.user_agent = Some(b"ua\" \"x\r\n");
        l.peer = Some(Peer::Name("p x"));
        let squid = text(l.squid());
        assert_eq!(squid.matches('\n').count(), 1);
        assert!(squid.ends_with('\n'));
        assert_eq!(
            squid
                .trim_end()
                .split(' ')
                .filter(|f| !f.is_empty())
                .count(),
            10
        );
        assert!(
            squid.contains(
                " http://x.test/a%22b%20c%0Ad%5Ce%01%C3%A9 a%20b%22c FIRSTUP_PARENT/p%20x "
            ),
            "{squid}"
        );
        let combined = text(l.combined());
        assert_eq!(combined.matches('\n').count(), 1);
        assert!(combined.ends_with('\n'));
        assert!(
            combined.contains(
                " a\\x20b\\\"c [05/Dec/2026:00:00:00 +0000] \"GET http://x.test/a\\\"b c\\nd\\\\e\\x01\\xc3\\xa9 HTTP/1.1\""
            ),
            "{combined}"
        );
        assert!(
            combined.ends_with(" \"ua\\\" \\\"x\\r\\n\"\n"),
            "{combined}"
        );
        // Outside the escapes, a quote only ever opens or closes one of the four fields.
        let bare_quotes = combined
            .as_bytes()
            .iter()
            .enumerate()
            .filter(|&(i, &b)| b == b'"' && combined.as_bytes()[i - 1] != b'\\')
            .count();
        assert_eq!(bare_quotes, 6, "{combined}");
    }

    #[test]
    fn a_url_is_logged_without_its_user_information_and_query() {
        let url = |uri: &str| url_as_logged(&uri.parse().unwrap());
        assert_eq!(
            url("http://user:pw@example.test:8080/a/b?token=secret"),
            "http://example.test:8080/a/b"
        );
        assert_eq!(url("http://[2001:db8::1]/"), "http://[2001:db8::1]/");
        assert_eq!(url("/origin-form?x"), "/origin-form");
    }

    #[test]
    fn refusals_map_to_squid_tags() {
        assert_eq!(refusal_tag(&Refusal::AuthRequired, false), "TCP_DENIED");
        assert_eq!(
            refusal_tag(&Refusal::DestinationDenied("x".into()), true),
            "TCP_DENIED"
        );
        let failed = Refusal::UpstreamFailed {
            reason: "x",
            socks: 1,
        };
        assert_eq!(refusal_tag(&failed, false), "TCP_MISS");
        assert_eq!(refusal_tag(&failed, true), "TCP_TUNNEL");
        assert_eq!(refusal_tag(&Refusal::NoEligibleProxy, true), "NONE");
        assert_eq!(TextLine::tag(None, true, true), "TCP_TUNNEL");
        assert_eq!(TextLine::tag(None, true, false), "TCP_MISS");
        assert_eq!(TextLine::tag(None, false, false), "NONE");
        assert_eq!(TextLine::tag(Some("TCP_DENIED"), true, false), "TCP_DENIED");
    }

    #[test]
    fn dates_are_the_proleptic_gregorian_calendar() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(11_017), (2000, 3, 1));
        assert_eq!(civil_from_days(20_819), (2027, 1, 1));
        let mut out = Vec::new();
        clf_time(
            &mut out,
            SystemTime::UNIX_EPOCH + Duration::from_secs(951_782_399),
        );
        assert_eq!(text(out), "28/Feb/2000:23:59:59 +0000");
    }
}
