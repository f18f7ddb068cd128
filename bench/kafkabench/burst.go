package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// burst is one burst run with k nodes: a producer at the steady rate, ten
// times that for a few seconds, then steady again, while the lag is
// sampled until the nodes have caught up; then every record is checked.
func (b *bench) burst(ctx context.Context, k, run int) (s BurstSample) {
	cfg := b.cfg
	s = BurstSample{Nodes: k, Run: run, SteadyRate: cfg.burstRate, BurstRate: cfg.burstRate * cfg.burstFactor,
		SteadySeconds: cfg.steadySeconds, BurstSeconds: cfg.burstSeconds}
	fail := func(err error) BurstSample {
		s.Error = err.Error()
		return s
	}
	g, err := b.startGroup(ctx, fmt.Sprintf("burst-k%d-r%d", k, run), k)
	if err != nil {
		return fail(err)
	}
	defer g.close()
	time.Sleep(500 * time.Millisecond)

	sched := newBurstSchedule(cfg)
	start := time.Now()
	p := startBurstProducer(ctx, g.c.cl, fresh(b.burstR), sched, start)
	defer p.stop()
	if err := watchLag(ctx, g, p, sched, start, &s); err != nil {
		return fail(err)
	}
	p.stop()
	if p.err != nil {
		return fail(p.err)
	}
	if err := b.checkBurst(ctx, g, p, &s); err != nil {
		return fail(err)
	}
	return s
}

// burstSchedule is the burst test's production over time: rate records/s
// until steady, factor times that until burstEnd, then rate again.
type burstSchedule struct {
	rate, factor     float64
	steady, burstEnd time.Duration
}

func newBurstSchedule(cfg config) burstSchedule {
	steady := time.Duration(cfg.steadySeconds * float64(time.Second))
	return burstSchedule{rate: cfg.burstRate, factor: cfg.burstFactor, steady: steady,
		burstEnd: steady + time.Duration(cfg.burstSeconds*float64(time.Second))}
}

// due is how many records should have been produced after d.
func (bs burstSchedule) due(d time.Duration) int {
	x := min(d, bs.steady).Seconds() * bs.rate
	if d > bs.steady {
		x += (min(d, bs.burstEnd) - bs.steady).Seconds() * bs.rate * bs.factor
	}
	if d > bs.burstEnd {
		x += (d - bs.burstEnd).Seconds() * bs.rate
	}
	return int(x)
}

// burstProducer hands the records of a pool to the Kafka client on a
// schedule, from its own goroutine, until stopped or the pool runs out.
// produced and err are the goroutine's: read them only after stop.
type burstProducer struct {
	acked, failed atomic.Int64
	produced      [2]int // records handed to the client at the burst's start and end
	err           error
	stopc         chan struct{}
	wg            sync.WaitGroup
}

func startBurstProducer(ctx context.Context, cl *kgo.Client, pool []*kgo.Record, sched burstSchedule, start time.Time) *burstProducer {
	p := &burstProducer{stopc: make(chan struct{})}
	p.wg.Go(func() {
		sent := 0
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.stopc:
				return
			case <-tick.C:
			}
			d := time.Since(start)
			n := min(sched.due(d), len(pool))
			if n == len(pool) && sent == n {
				p.err = fmt.Errorf("the nodes did not catch up within %s of the burst", burstTail)
				return
			}
			for ; sent < n; sent++ {
				cl.Produce(ctx, pool[sent], func(_ *kgo.Record, err error) {
					if err != nil {
						p.failed.Add(1)
					} else {
						p.acked.Add(1)
					}
				})
			}
			if d < sched.steady {
				p.produced[0] = sent
			} else if d < sched.burstEnd {
				p.produced[1] = sent
			}
		}
	})
	return p
}

// stop stops the producer and waits for it; a second call does nothing.
func (p *burstProducer) stop() {
	select {
	case <-p.stopc:
	default:
		close(p.stopc)
	}
	p.wg.Wait()
}

// watchLag samples, every 200 ms, the lag the nodes report and the true
// lag (records acknowledged minus stored) into s's series and maxima,
// until a second after the nodes have caught up from the burst: the true
// lag back to its steady maximum.
func watchLag(ctx context.Context, g *group, p *burstProducer, sched burstSchedule, start time.Time, s *BurstSample) error {
	var caught time.Duration
	for {
		time.Sleep(200 * time.Millisecond)
		d := time.Since(start)
		var lag float64
		for _, n := range g.nodes {
			m, err := n.metrics(ctx, "shredduck_kafka_lag_records{")
			if err != nil {
				return err
			}
			for _, v := range m {
				lag += v
			}
		}
		produced := p.acked.Load()
		stored, err := g.storedAll(ctx)
		if err != nil {
			return err
		}
		var sum int64
		for _, v := range stored {
			sum += v
		}
		trueLag := max(0, produced-sum)
		s.Series = append(s.Series, [3]float64{round3(d.Seconds()), lag, float64(trueLag)})
		switch {
		case d < sched.steady:
			if d > time.Second { // past the first fetches
				s.SteadyMaxLag = max(s.SteadyMaxLag, int64(lag))
				s.SteadyMaxTrueLag = max(s.SteadyMaxTrueLag, trueLag)
			}
		default:
			s.MaxLag = max(s.MaxLag, int64(lag))
			s.MaxTrueLag = max(s.MaxTrueLag, trueLag)
		}
		if d > sched.burstEnd && caught == 0 && trueLag <= s.SteadyMaxTrueLag {
			caught = d
			s.CatchUpSeconds = (d - sched.burstEnd).Seconds()
		}
		if caught > 0 && d > caught+time.Second {
			return nil
		}
		if d > sched.burstEnd+burstTail+5*time.Second {
			p.stop()
			if p.err != nil {
				return p.err
			}
			return fmt.Errorf("the nodes did not catch up within %s of the burst", burstTail)
		}
	}
}

// checkBurst, after the producer has stopped, checks that the cluster
// acknowledged every record and the nodes stored each once, fills in s's
// counts and marks it verified.
func (b *bench) checkBurst(ctx context.Context, g *group, p *burstProducer, s *BurstSample) error {
	if err := g.c.cl.Flush(ctx); err != nil {
		return err
	}
	if n := p.failed.Load(); n > 0 {
		return fmt.Errorf("%d records were not acknowledged by the cluster", n)
	}
	s.Records = p.acked.Load()
	s.AchievedBurstRate = float64(p.produced[1]-p.produced[0]) / b.cfg.burstSeconds
	ends, err := g.c.endOffsets(ctx)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	err = g.waitStored(wctx, ends, 100*time.Millisecond)
	cancel()
	if err != nil {
		return err
	}
	dbs := dbFiles(g)
	if err := g.stop(); err != nil {
		return err
	}
	if _, _, _, err := verify(dbs, s.Records); err != nil {
		return err
	}
	s.Verified = true
	removeDBs(dbs)
	return nil
}
