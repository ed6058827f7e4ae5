#!/usr/bin/env python3
"""Where a gateway's CPU goes, by stage of a request, from a `perf` profile.

    perf record -F 999 --call-graph dwarf,32768 -p <bench_gateway pid> -o perf.data -- sleep 7
    perf script -i perf.data | scripts/perf-stages.py

Prints one markdown row per stage with its share of the samples. A sample belongs to the
innermost (leaf-most) frame of its call chain that names a stage (generic parameters are
ignored, so a hyper frame generic over a gateway type is still hyper's); samples whose
chain names none go by their leaf: the kernel, the allocator, or the library it is in.
The rules are regular expressions over symbol paths: a renamed module needs its rule
renamed too.
"""
import sys, re, collections
RULES = [
    ('access log', r'proxypool_gateway::access::'),
    ('metrics and usage', r'proxypool_metrics|proxypool_gateway::usage::|proxypool_gateway::metrics::|metrics::'),
    ('ticket and proxy headers', r'tickets::|name_the_proxy'),
    ('retry copy (Replay)', r'forward::Replay'),
    ('header rewrite (hop-by-hop, credentials, Host)', r'headers::strip|retain_in_order|headers::prepare|canonical_host|headers::target_of'),
    ('auth (credentials, cache, limiter)', r'authenticate|inbound::auth::|ClientLimiter|Shield::check|PolicyLimiter|proxypool_throttle'),
    ('selectors, pick, rotation, sticky', r'routing::select|routing::selector|routing::rotation|routing::sticky|Picker::|Plan::'),
    ('upstream checkout (pool, lease)', r'idle_pool|ForwardDialer|upstream::pooled|capacity::|Reservation|Lease'),
    ('route (rest)', r'routing::route::'),
    ('hyper client connection (dispatch, channel, timers)', r'upstream::handshake'),
    ('response body (ProxyBody, from the client connection)', r'forward::body::'),
    ('admission and destination policy', r'admission::|destination::|DestinationPolicy'),
    ('forward and service (rest)', r'outbound::forward::|inbound::http::service::'),
    ('hyper server: head parse', r'role::Server::parse'),
    ('hyper server: head encode', r'role::Server::encode|encode_headers_with_original_case'),
    ('hyper client: head parse', r'role::Client::parse'),
    ('hyper client: head encode', r'role::Client::encode'),
    ('hyper server connection (dispatch, buffers, timers)', r'UpgradeableConnection|serve_connection'),
    ('accept and admission at accept', r'inbound::accept::'),
]
RULES = [(n, re.compile(p)) for n, p in RULES]
def leaf_kind(f):
    if '[kernel' in f or 'kallsyms' in f: return 'kernel'
    for k, n in [('malloc', 'malloc/free'), ('free', 'malloc/free'), ('_int_', 'malloc/free'), ('unlink_chunk', 'malloc/free'), ('tcache', 'malloc/free'),
                 ('memmove', 'memmove/memcpy'), ('memcpy', 'memmove/memcpy'), ('clock_gettime', 'clock reads'), ('Instant', 'clock reads'),
                 ('hyper::', 'hyper (dispatch, buffers)'), ('http::', 'http crate (HeaderMap, Uri)'), ('tokio::', 'tokio (tasks, I/O driver, timers)'),
                 ('bytes::', 'bytes'), ('__libc_recv', 'libc syscall wrappers'), ('writev', 'libc syscall wrappers'), ('__send', 'libc syscall wrappers'), ('epoll', 'libc syscall wrappers')]:
        if k in f: return n
    return 'other user space'
def norm(sym):
    sym = re.sub(r'\+0x[0-9a-f]+.*$', '', sym).strip()
    if sym.startswith('<'):
        depth = 0
        for j, ch in enumerate(sym):
            depth += ch == '<'; depth -= ch == '>'
            if depth == 0: break
        sym = sym[1:j].split(' as ')[0] + '::' + sym[j+1:].lstrip(':')
    out, depth = [], 0
    for ch in sym:
        if ch == '<': depth += 1
        elif ch == '>': depth = max(0, depth - 1)
        elif depth == 0: out.append(ch)
    return ''.join(out)
counts = collections.Counter(); total = 0
def flush(frames):
    global total
    if not frames: return
    total += 1
    if '[kernel' in frames[0] or 'kallsyms' in frames[0]:
        counts['kernel (sockets, TCP, scheduler)'] += 1; return
    for f in frames:
        for name, rx in RULES:
            if rx.search(f):
                counts[name] += 1; return
    counts[leaf_kind(frames[0])] += 1
frames = []
for line in sys.stdin:
    if line.startswith('\t') or line.startswith(' '):
        s = line.strip().split(' ', 1)
        if len(s) == 2: frames.append(s[1] if ('[kernel' in s[1] or 'kallsyms' in s[1]) else norm(s[1]))
    else:
        flush(frames); frames = []
flush(frames)
for k, v in counts.most_common(): print(f'| {k} | {100*v/total:.1f} % |')
print(f'samples {total}', file=sys.stderr)
