// Command streaming measures `shredduck serve` under streaming OTLP load
// from the OpenTelemetry Go SDK, side by side with a decode-only endpoint
// (the ceiling: a server that decodes each ExportTraceServiceRequest with
// pdata and discards it).
//
//	streaming -http http://127.0.0.1:4318 [-grpc 127.0.0.1:4317] -pid PID \
//	    [-protocol http|grpc] [-workers 16] [-records 1000000] [-runs 5] [-warmup 1] \
//	    [-out bench/results/streaming-....json]
//
// W workers each run their own TracerProvider (a blocking batch span
// processor, so no span is dropped) with an OTLP exporter (otlptracehttp,
// protobuf; or otlptracegrpc) and together create -records spans per run.
// Runs alternate between shredduck and the ceiling (a child process of this
// program, `streaming ceiling`), after -warmup runs of each that are not
// summarized. Reported per run: spans/s (spans created until every
// exporter has shut down), p50/p99/max export request latency (timed in the
// exporter's HTTP transport or a gRPC interceptor), and the server's peak
// RSS (VmHWM of -pid, reset before each run where the kernel allows). A run
// fails unless the rows the table gained (count(*) through POST /v1/query)
// equal the spans created, and the spans the exporters had acknowledged
// equal them too. bench/run_streaming.sh starts the server and runs this.
package main

import (
	"fmt"
	"os"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "ceiling" {
		os.Exit(runCeiling(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "load" {
		os.Args = append(os.Args[:1], os.Args[2:]...)
	}
	if err := runLoad(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "streaming:", err)
		os.Exit(1)
	}
}
