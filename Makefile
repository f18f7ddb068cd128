.PHONY: build fmt vet lint test bench bench-ingest ci

build:
	go build -ldflags "-X main.buildCommit=$$(git rev-parse --short HEAD 2>/dev/null)" -o shredduck ./cmd/shredduck

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	go vet ./...

lint: vet
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)

test:
	go test ./...

bench:
	go test -run '^$$' -bench . -benchmem ./...

bench-ingest:
	bench/run_ingest.sh

ci:
	.ci/run
