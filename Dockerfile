# shredduck serve in a container: OTLP/gRPC on 4317, OTLP/HTTP (and NDJSON,
# /v1/query, /metrics, /healthz) on 4318, the database in the volume /data.
#
#   docker build -t shredduck .
#   docker run -d --name shredduck --stop-timeout 60 -p 4317:4317 -p 4318:4318 \
#       -v shredduck-data:/data shredduck
#   docker exec shredduck shredduck query --server http://127.0.0.1:4318 'SELECT count(*) FROM otel_traces'
#
# shredduck links DuckDB through cgo (glibc, libstdc++), so the builder and
# the runtime are the same Debian release, bookworm. The build step is the
# one of the Makefile.

FROM golang:1.26-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=1
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -o /shredduck ./cmd/shredduck

FROM debian:bookworm-slim
# curl for the health check; libstdc++6 is DuckDB's C++ runtime.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl libstdc++6 \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 shredduck \
    && useradd --system --uid 10001 --gid shredduck --home-dir /data --no-create-home --shell /usr/sbin/nologin shredduck \
    && mkdir -p /data \
    && chown shredduck:shredduck /data
COPY --from=build /shredduck /usr/local/bin/shredduck
# A named volume starts with this directory's owner (10001); a bind-mounted
# host directory must be writable by uid 10001 (DuckDB writes the database,
# its WAL and spill files there).
VOLUME /data
WORKDIR /data
ENV HOME=/data
USER 10001:10001
EXPOSE 4317 4318
# /healthz answers 200 while the process is up (/readyz also checks the
# database and the commit queue). It assumes the default --http port.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD curl -fsS -o /dev/null http://127.0.0.1:4318/healthz || exit 1
# SIGTERM (docker stop) makes serve finish the requests in flight, commit,
# checkpoint and exit 0; that can take up to --shutdown-timeout (30s), more
# than docker stop's default 10s: run with --stop-timeout 60.
STOPSIGNAL SIGTERM
# Ingest is open on 0.0.0.0, as the Collector's receivers are; /v1/query,
# which reads every record, answers 403 until a token is set
# (-e SHREDDUCK_TOKEN=... or --token-file) or SHREDDUCK_ALLOW_UNAUTHENTICATED_QUERY=true.
# A request is answered once it is fsynced in the ingest log (serve's
# default, --ack log), which lives in the volume beside the database
# (/data/shredduck.duckdb.ingestlog); its rows are visible within a second.
ENTRYPOINT ["/usr/local/bin/shredduck"]
CMD ["serve", "--db", "/data/shredduck.duckdb", "--http", "0.0.0.0:4318", "--grpc", "0.0.0.0:4317"]
