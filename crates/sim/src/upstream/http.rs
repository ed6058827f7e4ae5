//! The HTTP kind: `CONNECT` tunnels and absolute-form plain HTTP over one keep-alive
//! connection, each request authenticated on its own (as real vendor gateways do).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use proxypool_proto::TargetAddr;
use proxypool_proto::http_connect::parse_basic_auth;
use tokio::net::{TcpListener, TcpStream};

use super::shared::{Shared, admit, relay};
use super::stats::Counters;
use crate::exit::connect_from;
use crate::http::{Body, respond, serve_connections};
use crate::shutdown::{ShutdownSignal, spawn_until};

/// Headers that describe one hop and must not be forwarded (RFC 9110 §7.6.1, plus the
/// proxy credentials and the non-standard `Proxy-Connection`).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Serves the HTTP kind; with `tls`, an HTTPS proxy (TLS to the proxy, then the same).
pub(super) async fn serve(
    listener: TcpListener,
    signal: ShutdownSignal,
    shared: Arc<Shared>,
    tls: Option<Arc<rustls::ServerConfig>>,
) {
    let accept_shared = Arc::clone(&shared);
    let tasks = signal.clone();
    serve_connections(
        listener,
        signal,
        tls,
        move |stream| admit(&accept_shared, stream),
        move |req, _peer: SocketAddr| handle(Arc::clone(&shared), tasks.clone(), req),
    )
    .await;
}

async fn handle(
    shared: Arc<Shared>,
    tasks: ShutdownSignal,
    req: Request<Incoming>,
) -> Response<Body> {
    let Some(exit) = exit_of(&shared, &req) else {
        Counters::bump(&shared.counters.auth_failures);
        let mut response = respond(
            StatusCode::PROXY_AUTHENTICATION_REQUIRED,
            "proxy authentication required\n",
        );
        response.headers_mut().insert(
            header::PROXY_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"proxypool-sim\""),
        );
        return response;
    };
    if shared.dice.roll() {
        Counters::bump(&shared.counters.injected_failures);
        return respond(StatusCode::BAD_GATEWAY, "injected failure\n");
    }
    shared.delay().await;
    if req.method() == Method::CONNECT {
        tunnel(shared, tasks, req, exit).await
    } else if req.uri().scheme_str() == Some("http") && req.uri().authority().is_some() {
        forward(shared, tasks, req, exit).await
    } else {
        respond(
            StatusCode::BAD_REQUEST,
            "expected CONNECT or an absolute-form http:// URI\n",
        )
    }
}

/// The exit the request's `Proxy-Authorization` earns (`None`: refused).
fn exit_of(shared: &Shared, req: &Request<Incoming>) -> Option<Ipv4Addr> {
    let credentials = req
        .headers()
        .get(header::PROXY_AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(parse_basic_auth);
    shared.exit_for(
        credentials
            .as_ref()
            .map(|(user, pass)| (user.as_str(), pass.as_str())),
    )
}

/// Connects to `target` from `exit`; a failure is counted and answered with a 502.
async fn dial(
    shared: &Shared,
    exit: Ipv4Addr,
    target: &TargetAddr,
) -> Result<TcpStream, Response<Body>> {
    connect_from(exit, target).await.map_err(|err| {
        Counters::bump(&shared.counters.connect_failures);
        respond(
            StatusCode::BAD_GATEWAY,
            format!("connect to target failed: {err}\n"),
        )
    })
}

async fn tunnel(
    shared: Arc<Shared>,
    tasks: ShutdownSignal,
    req: Request<Incoming>,
    exit: Ipv4Addr,
) -> Response<Body> {
    let Some(target) = req
        .uri()
        .authority()
        .and_then(|a| a.as_str().parse::<TargetAddr>().ok())
    else {
        return respond(StatusCode::BAD_REQUEST, "CONNECT needs host:port\n");
    };
    let outbound = match dial(&shared, exit, &target).await {
        Ok(stream) => stream,
        Err(response) => return response,
    };
    Counters::bump(&shared.counters.tunnels);
    // The client gets the 200 first; hyper hands over the connection once it is sent.
    let upgrade = hyper::upgrade::on(req);
    spawn_until(&tasks, async move {
        if let Ok(upgraded) = upgrade.await {
            relay(TokioIo::new(upgraded), outbound).await;
        }
    });
    respond(StatusCode::OK, "")
}

async fn forward(
    shared: Arc<Shared>,
    tasks: ShutdownSignal,
    req: Request<Incoming>,
    exit: Ipv4Addr,
) -> Response<Body> {
    let (mut parts, body) = req.into_parts();
    let Some(authority) = parts.uri.authority().cloned() else {
        return respond(StatusCode::BAD_REQUEST, "missing authority\n");
    };
    let port = authority.port_u16().unwrap_or(80);
    let target = match TargetAddr::domain(authority.host().trim_matches(['[', ']']), port) {
        Ok(target) => target,
        Err(_) => return respond(StatusCode::BAD_REQUEST, "bad host\n"),
    };
    let outbound = match dial(&shared, exit, &target).await {
        Ok(stream) => stream,
        Err(response) => return response,
    };
    Counters::bump(&shared.counters.requests);

    // One origin connection per request keeps this simple; client keep-alive is hyper's.
    let (mut sender, connection) =
        match hyper::client::conn::http1::handshake(TokioIo::new(outbound)).await {
            Ok(pair) => pair,
            Err(err) => {
                return respond(
                    StatusCode::BAD_GATEWAY,
                    format!("origin handshake: {err}\n"),
                );
            }
        };
    spawn_until(&tasks, async move {
        let _ = connection.await;
    });

    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |pq| pq.as_str())
        .to_owned();
    parts.uri = path
        .parse::<Uri>()
        .unwrap_or_else(|_| Uri::from_static("/"));
    strip_hop_by_hop(&mut parts.headers);
    if !parts.headers.contains_key(header::HOST)
        && let Ok(host) = HeaderValue::from_str(authority.as_str())
    {
        parts.headers.insert(header::HOST, host);
    }
    match sender.send_request(Request::from_parts(parts, body)).await {
        Ok(response) => {
            let (mut parts, body) = response.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, http_body_util::BodyExt::boxed(body))
        }
        Err(err) => respond(
            StatusCode::BAD_GATEWAY,
            format!("origin request failed: {err}\n"),
        ),
    }
}

fn strip_hop_by_hop(headers: &mut hyper::HeaderMap) {
    // Headers named in `Connection` are hop-by-hop too.
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    for name in HOP_BY_HOP
        .iter()
        .copied()
        .chain(named.iter().map(String::as_str))
    {
        headers.remove(name);
    }
}
