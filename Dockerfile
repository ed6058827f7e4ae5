# The proxypool image: one binary for every role (controller, gateway, migrate, sim, ...).
#
#   docker build -t proxypool .
#
# Two stages: a Rust image builds the release binary and splits its debug information
# into proxypool.debug (kept in the build stage, `docker build --target build` to get
# it); the runtime image gets only the binary and the CA certificates, runs as a
# dedicated non-root user, and has no shell tools the service needs (its health check is
# `proxypool probe`). Both base images are build arguments, so a mirror or a pinned digest
# can stand in: --build-arg RUST_IMAGE=... --build-arg RUNTIME_IMAGE=...
#
# A release binary already built on Debian bookworm (the runtime image's base, so the same
# C library) can go in as it is instead of being compiled again:
#
#   scripts/build-release.sh target/dist
#   docker build --build-arg PREBUILT_BINARY=target/dist/proxypool -t proxypool .
#
# (.dockerignore sends target/dist/proxypool and nothing else of target/; proxypool.debug
# stays on the host that built it.) The build stage then compiles nothing: any bookworm
# image with a shell and the ca-certificates package can be its RUST_IMAGE.
ARG RUST_IMAGE=rust:1.95-slim-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${RUST_IMAGE} AS build
# Empty (the default): compile. Otherwise the path, in the build context, of a prebuilt
# release binary to install instead.
ARG PREBUILT_BINARY=
WORKDIR /src
COPY . .
# The release build as it ships (scripts/build-release.sh: `cargo build --release --locked`,
# the binary stripped under 32 MB, its symbols and line tables in proxypool.debug beside it
# for gdb and backtraces), or the prebuilt binary. Either way it must run here.
RUN if [ -n "$PREBUILT_BINARY" ]; then \
      install -D -m 0755 "$PREBUILT_BINARY" /out/proxypool; \
    else \
      scripts/build-release.sh /out; \
    fi \
 && rm -rf target \
 && /out/proxypool --version

FROM ${RUNTIME_IMAGE}
# The CA bundle of the build image (Debian's ca-certificates): outbound TLS that relies on
# the system store (Redis Sentinel over TLS) needs it, and copying it keeps the runtime
# stage free of a package manager run.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=build /out/proxypool /usr/local/bin/proxypool
# A fixed uid/gid, so mounted secret files can be made readable to it (chown 10001).
RUN groupadd --system --gid 10001 proxypool \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin proxypool
USER 10001:10001
WORKDIR /etc/proxypool
# Client API 7080, control API 7070; a gateway's HTTP proxy 8080, SOCKS5 1080, admin 9090.
EXPOSE 7070 7080 8080 1080 9090
ENV PROXYPOOL_CONFIG=/etc/proxypool/proxypool.toml
# Liveness of the role the container runs: the client API's /healthz (controller, serve)
# or, when PROXYPOOL_HEALTH_URL names another (a gateway's admin listener), that one.
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
  CMD ["/bin/sh", "-c", "exec proxypool probe --timeout 4 \"${PROXYPOOL_HEALTH_URL:-http://127.0.0.1:7080/healthz}\" >/dev/null"]
ENTRYPOINT ["proxypool"]
CMD ["controller"]
