//! The floor for `scripts/bench-gateway.sh`: a TCP relay that copies bytes between each
//! client connection and a new connection to the upstream proxy, without reading them.
//!
//! ```text
//! bench_relay LISTEN UPSTREAM_ADDR
//! ```
//!
//! Whatever a forward proxy does, it must at least accept, dial the upstream, and move
//! every byte in and out of the kernel on both sides; this does exactly that and nothing
//! else (no parsing, no authentication, no routing), laid out like the gateway's client
//! listeners: one thread per CPU (`RELAY_THREADS` overrides), each with its own
//! single-threaded runtime and accept loop on a clone of the listening socket, so a
//! connection's both directions run on the thread that accepted it. Its CPU per request
//! and per tunnel set-up is what the proxies' CPU is compared with as the bound a proxy
//! cannot go below on this kernel and runtime. Runs until killed.

use std::net::{SocketAddr, TcpListener};
use std::thread;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let listen: SocketAddr = args[0].parse().expect("listen address");
    let upstream: SocketAddr = args[1].parse().expect("upstream address");
    let threads = std::env::var("RELAY_THREADS")
        .ok()
        .map(|n| n.parse().expect("a number"))
        .unwrap_or_else(|| thread::available_parallelism().map_or(1, |n| n.get()));
    let listener = TcpListener::bind(listen).expect("relay binds");
    listener
        .set_nonblocking(true)
        .expect("non-blocking listener");
    eprintln!("bench relay on {listen} -> {upstream}, {threads} threads");
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let listener = listener.try_clone().expect("listener clone");
            thread::spawn(move || serve(listener, upstream))
        })
        .collect();
    for handle in handles {
        handle.join().expect("relay thread");
    }
}

fn serve(listener: TcpListener, upstream: SocketAddr) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::from_std(listener).expect("tokio listener");
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let _ = client.set_nodelay(true);
                let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await else {
                    return;
                };
                let _ = server.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            });
        }
    });
}
