// Command collector checks shredduck serve behind a real OpenTelemetry
// Collector: it starts `shredduck serve` (the binary given by -shredduck)
// on a temporary database, starts an in-process collector (the otlp
// receiver and the otlp_http exporter, configured by docs/collector.yaml),
// sends N spans, N log records and N metric data points to the collector's
// receiver as plain OTLP/HTTP protobuf requests, waits until the exporter
// has drained its queue into shredduck, and checks that the tables hold
// exactly what was sent: the counts, one row per id, the resource.
//
// With -kafka the collector runs docs/scale-out/collector-kafka.yaml (the
// contrib kafkaexporter) against an in-process Kafka-protocol cluster, and
// -nodes shredduck nodes consume it as one consumer group; the check is
// the same over the union of their tables.
//
//	go run . -shredduck /path/to/shredduck -config ../../docs/collector.yaml -n 20000
//	go run . -shredduck /path/to/shredduck -config ../../docs/scale-out/collector-kafka.yaml -kafka -nodes 2
//
// It is a separate Go module so that the collector's dependencies stay out
// of shredduck's; it talks to shredduck over HTTP (and Kafka), and to the
// cluster only to wait and to read end offsets. bench/run_collector.sh
// builds both and runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/kafkaexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/otlphttpexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/batchprocessor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "collector:", err)
		os.Exit(1)
	}
}

type options struct {
	shredduck string
	config    string
	kafka     bool
	nodes     int
	n         int
	batch     int
	workers   int
	timeout   time.Duration
	keep      bool
}

func run() (err error) {
	o, err := parseOptions()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	var dir string
	dir, err = os.MkdirTemp("", "shredduck-collector-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintf(os.Stderr, "collector: keeping %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}

	// 1. With -kafka, the cluster the collector writes to and the nodes
	// consume from; then shredduck serve on a free port, once per node.
	var serveArgs []string
	var kafka *kafkaCluster
	if o.kafka {
		if kafka, serveArgs, err = startCluster(); err != nil {
			return err
		}
		defer kafka.close()
	}
	var nodes []*shredduck
	defer func() {
		for _, sd := range nodes {
			sd.kill()
		}
	}()
	if nodes, err = startNodes(ctx, o, dir, serveArgs); err != nil {
		return err
	}
	// The logs go with the temporary directory: show their ends first.
	defer func() {
		if err != nil {
			for _, sd := range nodes {
				sd.tailLog(os.Stderr, 20)
			}
		}
	}()
	if kafka != nil {
		if err := kafka.waitGroup(ctx, o.nodes); err != nil {
			return err
		}
	}

	// 2. The collector.
	recvHTTP, stopCollector, err := startConfiguredCollector(ctx, o, nodes[0].url)
	if err != nil {
		return err
	}
	collectorStopped := false
	defer func() {
		if !collectorStopped {
			stopCollector()
		}
	}()

	// 3. Send.
	start := time.Now()
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: o.workers}}
	sent := map[string]*sender{}
	for _, sig := range signals {
		s := &sender{sig: sig}
		sent[sig.table] = s
		if err := s.send(ctx, client, "http://"+recvHTTP, o); err != nil {
			return err
		}
	}
	sendTime := time.Since(start)

	// 4. Wait for the exporter to drain: every table reaches its count,
	// summed over the nodes.
	if err := waitRows(ctx, client, nodes, o.n); err != nil {
		return fmt.Errorf("the collector did not deliver everything before the timeout: %w", err)
	}
	drainTime := time.Since(start)

	// 5. Stop the collector (it flushes what it still holds), let the
	// nodes store the rest of what it wrote to Kafka, then check.
	collectorStopped = true
	if err := stopCollector(); err != nil {
		return fmt.Errorf("collector: %w", err)
	}
	problems, err := checkDelivery(ctx, client, o, kafka, nodes, sent)
	if err != nil {
		return err
	}
	total := float64(3 * o.n)
	fmt.Fprintf(os.Stderr, "collector: sent %d records in %.2fs, all in shredduck after %.2fs (%.0f records/s end to end)\n",
		3*o.n, sendTime.Seconds(), drainTime.Seconds(), total/drainTime.Seconds())
	if len(problems) > 0 {
		return fmt.Errorf("%d problems:\n  %s", len(problems), strings.Join(problems, "\n  "))
	}
	fmt.Println("collector: OK: every span, log record and data point sent to the collector is in shredduck, once")
	return nil
}

// parseOptions reads the command line into options and checks them.
func parseOptions() (options, error) {
	var o options
	flag.StringVar(&o.shredduck, "shredduck", "", "the shredduck `binary` (go build ./cmd/shredduck)")
	flag.StringVar(&o.config, "config", "../../docs/collector.yaml", "collector configuration `file`")
	flag.BoolVar(&o.kafka, "kafka", false, "the collector exports to an in-process Kafka cluster that shredduck consumes (-config docs/scale-out/collector-kafka.yaml)")
	flag.IntVar(&o.nodes, "nodes", 1, "-kafka: shredduck nodes in one consumer group")
	flag.IntVar(&o.n, "n", 20000, "spans, log records and metric data points to send (each)")
	flag.IntVar(&o.batch, "batch", 100, "records per request to the collector")
	flag.IntVar(&o.workers, "workers", 4, "concurrent senders")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Minute, "limit of the whole check")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (the database and logs)")
	flag.Parse()
	if o.shredduck == "" {
		return o, errors.New("-shredduck is required")
	}
	if o.n < 1 || o.batch < 1 || o.workers < 1 || o.nodes < 1 {
		return o, errors.New("-n, -batch, -workers and -nodes must be positive")
	}
	if o.nodes > 1 && !o.kafka {
		return o, errors.New("-nodes > 1 needs -kafka (the OTLP/HTTP exporter sends to one node)")
	}
	return o, nil
}

// startCluster starts the Kafka cluster and sets KAFKA_BROKERS for the
// collector's configuration; serveArgs point shredduck serve at it.
func startCluster() (kafka *kafkaCluster, serveArgs []string, err error) {
	if kafka, err = startKafka(); err != nil {
		return nil, nil, err
	}
	brokers := strings.Join(kafka.brokers, ",")
	os.Setenv("KAFKA_BROKERS", brokers)
	fmt.Fprintf(os.Stderr, "collector: kafka cluster on %s, topics %s\n", brokers, strings.Join(kafkaTopics, ","))
	return kafka, []string{"--kafka-brokers", brokers}, nil
}

// startNodes starts o.nodes shredduck serve processes, each on its own
// database and log file in dir. On an error it returns those it started,
// for the caller to kill.
func startNodes(ctx context.Context, o options, dir string, serveArgs []string) ([]*shredduck, error) {
	var nodes []*shredduck
	for i := range o.nodes {
		name := fmt.Sprintf("node%d", i+1)
		sd, err := startShredduck(ctx, o.shredduck, filepath.Join(dir, name+".duckdb"), filepath.Join(dir, name+".log"), serveArgs...)
		if err != nil {
			return nodes, err
		}
		nodes = append(nodes, sd)
		fmt.Fprintf(os.Stderr, "collector: shredduck serve %s (pid %d) on %s\n", name, sd.cmd.Process.Pid, sd.url)
	}
	return nodes, nil
}

// startConfiguredCollector starts the collector, configured by the
// documented file, its ports, shredduck's address (node, the first node)
// and the brokers set through the variables the file reads, and waits
// until its OTLP/HTTP receiver listens on recvHTTP. stop shuts it down;
// the caller must call it once it has started.
func startConfiguredCollector(ctx context.Context, o options, node string) (recvHTTP string, stop func() error, err error) {
	recvHTTP, recvGRPC := freePort(), freePort()
	if recvHTTP == "" || recvGRPC == "" {
		return "", nil, errors.New("no free port")
	}
	os.Setenv("COLLECTOR_HTTP_ENDPOINT", recvHTTP)
	os.Setenv("COLLECTOR_GRPC_ENDPOINT", recvGRPC)
	os.Setenv("SHREDDUCK_ENDPOINT", node)
	col, colDone, err := startCollector(ctx, o.config)
	if err != nil {
		return "", nil, err
	}
	stop = func() error {
		col.Shutdown()
		select {
		case err := <-colDone:
			return err
		case <-time.After(time.Minute):
			return errors.New("the collector did not stop within a minute")
		}
	}
	if err := waitListening(ctx, recvHTTP, colDone); err != nil {
		stop()
		return "", nil, fmt.Errorf("collector receiver: %w", err)
	}
	to := node
	if o.kafka {
		to = "kafka"
	}
	fmt.Fprintf(os.Stderr, "collector: collector %s receiving OTLP/HTTP on %s, exporting to %s\n", o.config, recvHTTP, to)
	return recvHTTP, stop, nil
}

// checkDelivery checks, once the collector has stopped, that the
// collector accepted every record sent and the nodes' tables hold each
// once, and stops the nodes. With kafka it first waits for the nodes to
// store what the collector wrote. It returns what is wrong; an error is a
// check that could not run.
func checkDelivery(ctx context.Context, client *http.Client, o options, kafka *kafkaCluster, nodes []*shredduck, sent map[string]*sender) ([]string, error) {
	var problems []string
	if kafka != nil {
		p, err := kafka.settle(ctx, client, nodes)
		if err != nil {
			return nil, err
		}
		problems = append(problems, p...)
	} else if reqs, err := exportRequests(ctx, client, nodes[0].url); err == nil {
		fmt.Fprintf(os.Stderr, "collector: requests the exporter made to shredduck: %s\n", reqs)
	}
	for _, sig := range signals {
		s := sent[sig.table]
		fmt.Fprintf(os.Stderr, "collector: %-12s sent %d in %d requests (%d retried)\n", sig.table, s.records.Load(), s.requests.Load(), s.retries.Load())
		if s.records.Load() != int64(o.n) {
			problems = append(problems, fmt.Sprintf("%s: the collector accepted %d records, want %d", sig.table, s.records.Load(), o.n))
		}
	}
	p, err := checkTables(ctx, client, nodes, o.n)
	if err != nil {
		return nil, err
	}
	problems = append(problems, p...)
	for _, sd := range nodes {
		if err := sd.stop(); err != nil {
			problems = append(problems, err.Error())
		}
	}
	return problems, nil
}

// components is the collector's build: the otlp receiver, the batch
// processor, the otlp_http and kafka exporters, and the telemetry the
// service needs.
func components() (otelcol.Factories, error) {
	var f otelcol.Factories
	var err error
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	if f.Processors, err = otelcol.MakeFactoryMap[processor.Factory](batchprocessor.NewFactory()); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](otlphttpexporter.NewFactory(), kafkaexporter.NewFactory()); err != nil {
		return f, err
	}
	f.Telemetry = otelconftelemetry.NewFactory()
	return f, nil
}

// startCollector runs a collector on the configuration file, with its own
// metrics off (no port 8888) and its log at warn.
func startCollector(ctx context.Context, config string) (*otelcol.Collector, chan error, error) {
	abs, err := filepath.Abs(config)
	if err != nil {
		return nil, nil, err
	}
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "shredduck-collector-bench", Description: "shredduck collector check", Version: "dev"},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			URIs: []string{
				"file:" + abs,
				"yaml:service::telemetry::metrics::level: none",
				"yaml:service::telemetry::logs::level: warn",
			},
			ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory(), yamlprovider.NewFactory()},
			DefaultScheme:     "env",
		}},
		DisableGracefulShutdown: true, // this program handles its own signals
	})
	if err != nil {
		return nil, nil, err
	}
	done := make(chan error, 1)
	go func() { done <- col.Run(context.WithoutCancel(ctx)) }()
	return col, done, nil
}

// waitListening waits until addr accepts connections (or the collector
// exits).
func waitListening(ctx context.Context, addr string, exited chan error) error {
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the collector exited: %v", err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// freePort returns 127.0.0.1:port of a port that was free a moment ago.
func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return ""
	}
	defer l.Close()
	return l.Addr().String()
}
