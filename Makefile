# Every target that compiles the DuckDB side needs the duckdb_arrow tag
# (the driver's Arrow interface, which the ingest path uses).
TAGS := -tags duckdb_arrow

.PHONY: build fmt vet lint test bench bench-ingest ci

build:
	go build $(TAGS) -ldflags "-X main.buildCommit=$$(git rev-parse --short HEAD 2>/dev/null)" -o shredduck ./cmd/shredduck

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	go vet $(TAGS) ./...

lint: vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)

test:
	go test $(TAGS) ./...

bench:
	go test $(TAGS) -run '^$$' -bench . -benchmem ./...

bench-ingest:
	bench/run_ingest.sh

ci:
	.ci/run
