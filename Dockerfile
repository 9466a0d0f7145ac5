# syntax=docker/dockerfile:1
#
# Herald container image.
#
#   docker build -t <registry>/herald:<tag> .
#   docker run -p 8080:8080 -v herald-data:/data \
#     -e HERALD__SERVER__AUTH__BEARER_TOKENS="$TOKEN" <registry>/herald:<tag>
#
# For Kubernetes, push it and name it in your overlay of deploy/kubernetes (whose placeholder is
# registry.invalid/herald): kustomize edit set image herald=<registry>/herald:<tag>
#
# Configuration: /app/config/herald.yaml. The working directory is /app and `herald serve` reads
#   config/herald.yaml by default (HERALD_CONFIG or `serve --config FILE` choose another file); deploy/kubernetes
#   mounts its ConfigMap over /app/config. Any key can be overridden with HERALD__<SECTION>__<KEY> variables, e.g.
#   HERALD__SERVER__AUTH__BEARER_TOKENS (comma-separated). Herald refuses to listen beyond loopback without
#   credentials, so set a token (or server.auth.allow_anonymous when a proxy in front authenticates).
# Port: 8080 (HERALD__SERVER__LISTEN below): POST /v1/argocd/events, plus /healthz, /readyz and /metrics.
# Data: SQLite at /data/herald.db, a volume. For several replicas set HERALD__STORAGE__URL to a postgres:// URL.
# Runs as uid/gid 10001; the root filesystem can be read-only (only /data is written).

FROM rust:1-bookworm AS builder
WORKDIR /src
COPY . .
# Cache mounts keep the registry and the build directory between builds; the binary is copied out of the cache.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin herald \
 && install -D -m 0755 target/release/herald /out/herald

FROM debian:bookworm-slim
# ca-certificates: receivers (Slack, Jira, PagerDuty, …) and the Argo CD API are reached over HTTPS.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 herald \
 && useradd --system --uid 10001 --gid 10001 --home-dir /app --no-create-home --shell /usr/sbin/nologin herald \
 && mkdir -p /data \
 && chown 10001:10001 /data
WORKDIR /app
COPY --from=builder /out/herald /usr/local/bin/herald
COPY config/herald.yaml /app/config/herald.yaml
ENV HERALD__SERVER__LISTEN=0.0.0.0:8080 \
    HERALD__STORAGE__URL=sqlite:///data/herald.db
USER 10001:10001
EXPOSE 8080
VOLUME ["/data"]
ENTRYPOINT ["herald"]
CMD ["serve"]
