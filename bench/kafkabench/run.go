package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/shredduck/shredduck/bench/internal/benchutil"
)

// bench holds the records every run of a shape produces, encoded once.
type bench struct {
	cfg    config
	shapes map[int][]*kgo.Record
	burstR []*kgo.Record // one span each; enough for the longest burst run
}

// burstTail is how long the burst test waits at most, after the burst,
// for the nodes to catch up.
const burstTail = 60 * time.Second

func newBench(cfg config) (*bench, error) {
	b := &bench{cfg: cfg, shapes: map[int][]*kgo.Record{}}
	for _, s := range cfg.shapes {
		n := int((cfg.spans + int64(s) - 1) / int64(s))
		recs, err := newRecords(s).encode(n)
		if err != nil {
			return nil, err
		}
		b.shapes[s] = recs
	}
	if cfg.burstRate > 0 {
		n := cfg.burstRate*(cfg.steadySeconds+burstTail.Seconds()) + cfg.burstRate*cfg.burstFactor*cfg.burstSeconds
		recs, err := newRecords(1).encode(int(n) + 1)
		if err != nil {
			return nil, err
		}
		b.burstR = recs
	}
	return b, nil
}

// fresh copies recs for one produce: the client sets a record's fields.
func fresh(recs []*kgo.Record) []*kgo.Record {
	out := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		out[i] = &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value}
	}
	return out
}

// group is a cluster and K nodes consuming it as one group.
type group struct {
	c     *cluster
	nodes []*node
}

// startGroup starts a cluster and k nodes and waits until the group has
// given each its share of the partitions.
func (b *bench) startGroup(ctx context.Context, tag string, k int) (*group, error) {
	c, err := startCluster()
	if err != nil {
		return nil, err
	}
	g := &group{c: c}
	for i := range k {
		name := fmt.Sprintf("%s-node%d", tag, i+1)
		profile := ""
		if b.cfg.profile != "" {
			profile = filepath.Join(b.cfg.profile, name+".pprof")
		}
		db := filepath.Join(b.cfg.dir, name+".duckdb")
		benchutil.RemoveDB(db)
		sctx, cancel := context.WithTimeout(ctx, time.Minute)
		n, err := startNode(sctx, b.cfg.bin, name, db, filepath.Join(b.cfg.dir, name+".log"), c.brokers, profile)
		cancel()
		if err != nil {
			g.close()
			return nil, err
		}
		g.nodes = append(g.nodes, n)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := c.waitGroup(wctx, k); err != nil {
		g.close()
		return nil, err
	}
	return g, nil
}

// stop stops the nodes (SIGTERM, exit status 0 wanted) and the cluster.
func (g *group) stop() error {
	var errs []error
	for _, n := range g.nodes {
		if err := n.stop(); err != nil {
			errs = append(errs, fmt.Errorf("%w\n%s", err, n.tail(10)))
		}
	}
	g.nodes = nil
	g.c.close()
	return errors.Join(errs...)
}

// close kills what is left after a failure.
func (g *group) close() {
	for _, n := range g.nodes {
		n.kill()
	}
	g.c.close()
}

// storedAll returns, for each partition, the highest next offset any node
// stored.
func (g *group) storedAll(ctx context.Context) (map[int32]int64, error) {
	stored := map[int32]int64{}
	for _, n := range g.nodes {
		if err := n.stored(ctx, stored); err != nil {
			return nil, err
		}
	}
	return stored, nil
}

func behind(ends, stored map[int32]int64) (parts int, records int64) {
	for p, end := range ends {
		if d := end - stored[p]; d > 0 {
			parts++
			records += d
		}
	}
	return parts, records
}

// waitStored polls the nodes until they have stored ends.
func (g *group) waitStored(ctx context.Context, ends map[int32]int64, every time.Duration) error {
	for {
		stored, err := g.storedAll(ctx)
		if err != nil {
			return err
		}
		parts, recs := behind(ends, stored)
		if parts == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the nodes did not store every record before the timeout: %d records of %d partitions behind; end offsets %v, stored %v", recs, parts, ends, stored)
		case <-time.After(every):
		}
	}
}

// waitConsumed polls the nodes' /metrics until they have decoded n
// records between them (shredduck_kafka_records_total): cheaper for a
// busy node than a query of shredduck_sources, which a profile showed
// costing it 7% of its CPU at 20 a second. A record is decoded before its
// transaction commits, so waitStored follows.
func (g *group) waitConsumed(ctx context.Context, n int64) error {
	for {
		var got float64
		for _, nd := range g.nodes {
			m, err := nd.metrics(ctx, "shredduck_kafka_records_total{")
			if err != nil {
				return err
			}
			for _, v := range m {
				got += v
			}
		}
		if int64(got) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the nodes decoded %.0f of %d records before the timeout", got, n)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// cpu returns each node's CPU seconds so far.
func (g *group) cpu() ([]float64, error) {
	out := make([]float64, len(g.nodes))
	for i, n := range g.nodes {
		s, err := n.cpuSeconds()
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

func selfCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// throughput is one throughput run: a backlog of the shape's records,
// consumed by k nodes from the moment they are continued.
func (b *bench) throughput(ctx context.Context, shape, k, run int) (s Sample) {
	recs := b.shapes[shape]
	s = Sample{SpansPerRecord: shape, Nodes: k, Run: run, Records: int64(len(recs)), Spans: int64(len(recs)) * int64(shape)}
	for _, r := range recs {
		s.RecordBytes += int64(len(r.Value))
	}
	fail := func(err error) Sample {
		s.Error = err.Error()
		return s
	}
	t0 := time.Now()
	g, err := b.startGroup(ctx, fmt.Sprintf("tp%d-k%d-r%d", shape, k, run), k)
	if err != nil {
		return fail(err)
	}
	defer g.close()
	s.SettleSeconds = time.Since(t0).Seconds()
	time.Sleep(500 * time.Millisecond) // past the claims' commits
	for _, n := range g.nodes {
		if err := n.signal(syscall.SIGSTOP); err != nil {
			return fail(err)
		}
	}
	t1 := time.Now()
	if err := g.c.produce(ctx, fresh(recs)); err != nil {
		return fail(err)
	}
	s.ProduceSeconds = time.Since(t1).Seconds()
	if s.ProduceSeconds > 30 {
		// The nodes' sessions (45 s) would expire and the group rebalance.
		return fail(fmt.Errorf("producing the backlog took %.0f s, too long with the nodes stopped: fewer -spans", s.ProduceSeconds))
	}
	ends, err := g.c.endOffsets(ctx)
	if err != nil {
		return fail(err)
	}
	var total int64
	for _, e := range ends {
		total += e
	}
	if total != s.Records {
		return fail(fmt.Errorf("the cluster holds %d records, %d were produced", total, s.Records))
	}
	cpu0, err := g.cpu()
	if err != nil {
		return fail(err)
	}
	self0 := selfCPU()
	start := time.Now()
	for _, n := range g.nodes {
		if err := n.signal(syscall.SIGCONT); err != nil {
			return fail(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	err = g.waitConsumed(wctx, s.Records)
	if err == nil {
		err = g.waitStored(wctx, ends, 50*time.Millisecond)
	}
	cancel()
	if err != nil {
		return fail(err)
	}
	s.Seconds = time.Since(start).Seconds()
	s.DriverCPU = selfCPU() - self0
	cpu1, err := g.cpu()
	if err != nil {
		return fail(err)
	}
	for i := range cpu1 {
		s.NodeCPU = append(s.NodeCPU, cpu1[i]-cpu0[i])
		s.NodePeakRSS = append(s.NodePeakRSS, g.nodes[i].peakRSS())
	}
	dbs := dbFiles(g)
	if err := g.stop(); err != nil {
		return fail(err)
	}
	if s.NodeSpans, s.Rows, s.Distinct, err = verify(dbs, s.Spans); err != nil {
		return fail(err)
	}
	s.Verified = true
	removeDBs(dbs)
	return s
}

func dbFiles(g *group) []string {
	var out []string
	for _, n := range g.nodes {
		out = append(out, n.db)
	}
	return out
}

func removeDBs(dbs []string) {
	for _, db := range dbs {
		benchutil.RemoveDB(db)
	}
}

// verify attaches the nodes' database files and checks that their
// otel_traces tables together hold want spans, each once, and that every
// node holds some.
func verify(dbs []string, want int64) (perNode []int64, rows, distinct int64, err error) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, 0, 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1) // the ATTACHes belong to the connection
	var parts []string
	for i, f := range dbs {
		alias := fmt.Sprintf("n%d", i+1)
		if _, err := db.Exec("ATTACH " + benchutil.QuoteString(f) + " AS " + alias + " (READ_ONLY)"); err != nil {
			return nil, 0, 0, fmt.Errorf("attach %s: %w", f, err)
		}
		var tables int
		if err := db.QueryRow("SELECT count(*) FROM duckdb_tables() WHERE database_name = ? AND table_name = 'otel_traces'", alias).Scan(&tables); err != nil {
			return nil, 0, 0, err
		}
		var n int64
		if tables > 0 {
			if err := db.QueryRow("SELECT count(*) FROM " + alias + ".otel_traces").Scan(&n); err != nil {
				return nil, 0, 0, err
			}
			parts = append(parts, "SELECT span_id FROM "+alias+".otel_traces")
		}
		perNode = append(perNode, n)
	}
	if len(parts) > 0 {
		if err := db.QueryRow("SELECT count(*), count(DISTINCT span_id) FROM ("+strings.Join(parts, " UNION ALL ")+")").Scan(&rows, &distinct); err != nil {
			return perNode, 0, 0, err
		}
	}
	var problems []string
	if rows != want || distinct != want {
		problems = append(problems, fmt.Sprintf("the nodes hold %d spans, %d distinct span ids; %d were produced", rows, distinct, want))
	}
	for i, n := range perNode {
		if n == 0 {
			problems = append(problems, fmt.Sprintf("node%d holds no span", i+1))
		}
	}
	if len(problems) > 0 {
		return perNode, rows, distinct, fmt.Errorf("count mismatch: %s (spans per node %v)", strings.Join(problems, "; "), perNode)
	}
	return perNode, rows, distinct, nil
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }
