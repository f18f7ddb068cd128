package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// assigned notes new partitions; adjust claims them.
func (src *kafkaSource) assigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	src.d.Log.Debug("kafka partitions assigned", slog.Any("partitions", assigned))
	src.mu.Lock()
	defer src.mu.Unlock()
	for t, ps := range assigned {
		for _, part := range ps {
			tp := topicPart{t, part}
			if p := src.parts[tp]; p != nil && p.state == partRevoking {
				p.state = partWaiting // still settling or unreleased: claimed again by tend
				continue
			}
			src.parts[tp] = &kafkaPart{state: partWaiting}
		}
	}
}

// adjust decides where each newly assigned partition starts: it claims
// those it may take and pauses the others.
func (src *kafkaSource) adjust(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	commits, err := src.fetchCommits(ctx)
	if err != nil {
		src.d.Log.Warn("cannot read the group's committed offsets; the assigned partitions wait", slog.String("error", err.Error()))
	}
	src.mu.Lock()
	// What the group says this node owns and no longer holds (it stopped
	// without releasing): released by tend once read from the database.
	for tp, c := range commits {
		if c.meta == metaOwned+src.node && src.parts[tp] == nil {
			src.parts[tp] = &kafkaPart{state: partRevoking, claimed: true, handed: -1, stored: -1, commit: c.offset}
		}
	}
	src.mu.Unlock()
	var pause, resume map[string][]int32
	for t, ps := range offsets {
		for part := range ps {
			tp := topicPart{t, part}
			start, ok := int64(0), false
			if err == nil {
				start, ok = src.claim(ctx, tp, commits[tp])
			}
			if ok {
				ps[part] = kgo.NewOffset().At(start).WithEpoch(-1)
				if resume == nil {
					resume = map[string][]int32{}
				}
				resume[t] = append(resume[t], part)
				continue
			}
			if pause == nil {
				pause = map[string][]int32{}
			}
			pause[t] = append(pause[t], part)
		}
	}
	if kafkaAfterClaims != nil {
		kafkaAfterClaims(src)
	}
	src.pauseMu.Lock()
	defer src.pauseMu.Unlock()
	if pause != nil {
		// tend may have claimed one since its claim here failed (the
		// partition was assigned before this callback ran): it starts
		// where that claim put it instead of being paused for good.
		src.mu.Lock()
		for t, ps := range pause {
			keep := ps[:0]
			for _, part := range ps {
				if p := src.parts[topicPart{t, part}]; p != nil && p.state == partOwned {
					offsets[t][part] = kgo.NewOffset().At(p.next).WithEpoch(-1)
					if resume == nil {
						resume = map[string][]int32{}
					}
					resume[t] = append(resume[t], part)
					continue
				}
				keep = append(keep, part)
			}
			pause[t] = keep
		}
		src.mu.Unlock()
		src.client().PauseFetchPartitions(pause)
	}
	if resume != nil {
		// A pause outlives the assignment it was made in.
		src.client().ResumeFetchPartitions(resume)
	}
	src.kickTend()
	return offsets, nil
}

// kafkaAfterClaims, set by tests, runs in adjust between its claims and
// its pauses.
var kafkaAfterClaims func(*kafkaSource)

// claim takes a waiting partition if no other node holds it: it commits
// the start offset as owned by this node and returns it.
func (src *kafkaSource) claim(ctx context.Context, tp topicPart, c groupCommit) (int64, bool) {
	// One claim at a time, from its first look at the partition: the
	// group's callback and tend both claim, and a claim that found the
	// partition owned by the other would take it for revoked.
	src.commitMu.Lock()
	defer src.commitMu.Unlock()
	src.mu.Lock()
	p := src.parts[tp]
	if p == nil || p.state != partWaiting || (p.claimed && !p.settled()) {
		src.mu.Unlock()
		return 0, false
	}
	src.mu.Unlock()
	if owner, ok := strings.CutPrefix(c.meta, metaOwned); ok && owner != src.node {
		src.mu.Lock()
		p.owner = owner
		src.mu.Unlock()
		src.d.Limited.Log(slog.LevelWarn, "kafka wait "+tp.key(), "an assigned partition waits for the node that holds it to release it (it stopped without releasing: start it again)",
			slog.String("topic", tp.topic), slog.Int("partition", int(tp.part)), slog.String("holder", owner))
		return 0, false
	}
	stored, has, err := src.d.DB.StoredPosition(ctx, kafkaSourceName+"/"+tp.key())
	if err != nil {
		src.d.Limited.Log(slog.LevelError, "kafka claim", "cannot read a partition's stored offset; it waits", slog.String("error", err.Error()))
		return 0, false
	}
	start := max(c.offset, 0)
	if has && int64(stored) > start {
		if c.meta != metaOwned+src.node {
			src.d.Log.Warn("this node stored a partition past the group's committed offset; it resumes from its own",
				slog.String("topic", tp.topic), slog.Int("partition", int(tp.part)), slog.Int64("committed", c.offset), slog.Uint64("stored", stored))
		}
		start = int64(stored)
	}
	err = src.commit(ctx, map[topicPart]int64{tp: start}, metaOwned)
	src.mu.Lock()
	if err != nil {
		src.mu.Unlock()
		src.d.Limited.Log(slog.LevelWarn, "kafka claim", "cannot claim an assigned partition in the group; it waits", slog.String("topic", tp.topic), slog.Int("partition", int(tp.part)), slog.String("error", err.Error()))
		return 0, false
	}
	if cur := src.parts[tp]; cur != p || p.state != partWaiting {
		// Revoked meanwhile: the claim landed, so it is released by tend.
		src.parts[tp] = &kafkaPart{state: partRevoking, claimed: true, handed: start, stored: start, commit: start}
		src.mu.Unlock()
		return 0, false
	}
	*p = kafkaPart{state: partOwned, claimed: true, next: start, handed: start, stored: start, commit: start, highWater: p.highWater}
	src.purge(tp)
	src.d.Log.Debug("kafka partition claimed", slog.String("topic", tp.topic), slog.Int("partition", int(tp.part)), slog.Int64("start", start))
	src.mu.Unlock()
	return start, true
}

// revoked stops handing out the partitions, waits until the loader has
// stored what it took of them, and releases them.
func (src *kafkaSource) revoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	src.d.Log.Debug("kafka partitions revoked", slog.Any("partitions", revoked))
	src.mu.Lock()
	for t, ps := range revoked {
		for _, part := range ps {
			tp := topicPart{t, part}
			p := src.parts[tp]
			if p == nil {
				continue
			}
			if !p.claimed {
				delete(src.parts, tp)
				continue
			}
			p.state = partRevoking
			src.lag.DeleteLabelValues(t, strconv.Itoa(int(part)))
			src.purge(tp)
		}
	}
	deadline := time.Now().Add(src.cfg.SessionTimeout / 2)
	t := time.AfterFunc(time.Until(deadline), func() { src.mu.Lock(); src.cond.Broadcast(); src.mu.Unlock() })
	defer t.Stop()
	for time.Now().Before(deadline) && !src.allSettled(revoked) {
		src.cond.Wait()
	}
	src.mu.Unlock()
	src.releaseSettled(ctx)
}

func (src *kafkaSource) allSettled(ps map[string][]int32) bool {
	for t, parts := range ps {
		for _, part := range parts {
			if p := src.parts[topicPart{t, part}]; p != nil && p.state == partRevoking && !p.settled() {
				return false
			}
		}
	}
	return true
}

// releaseSettled releases the revoked partitions the loader is done with.
func (src *kafkaSource) releaseSettled(ctx context.Context) {
	src.commitMu.Lock()
	defer src.commitMu.Unlock()
	src.mu.Lock()
	var unknown []topicPart
	rel := map[topicPart]int64{}
	for tp, p := range src.parts {
		if p.state != partRevoking || !p.claimed {
			continue
		}
		if p.stored < 0 {
			unknown = append(unknown, tp)
		} else if p.settled() {
			rel[tp] = p.stored
		}
	}
	src.mu.Unlock()
	for _, tp := range unknown {
		// Held by the last run: its stored offset is in the database.
		pos, _, err := src.d.DB.StoredPosition(ctx, kafkaSourceName+"/"+tp.key())
		if err != nil {
			src.d.Limited.Log(slog.LevelError, "kafka release", "cannot read a partition's stored offset to release it", slog.String("error", err.Error()))
			continue
		}
		src.mu.Lock()
		if p := src.parts[tp]; p != nil && p.stored < 0 {
			// Its claim committed the offset it started at, which may be
			// past what it stored since: the part between is stored by
			// the nodes before it.
			p.stored = max(int64(pos), p.commit)
			p.handed = p.stored
			if p.state == partRevoking {
				rel[tp] = p.stored
			}
		}
		src.mu.Unlock()
	}
	if len(rel) == 0 {
		return
	}
	// Only what the group still says this node owns: an earlier release
	// whose answer was lost may have landed, and the next holder claimed
	// the partition since.
	commits, err := src.fetchCommits(ctx)
	if err != nil {
		src.d.Limited.Log(slog.LevelWarn, "kafka release", "cannot read the group's offsets to release partitions; retrying", slog.String("error", err.Error()))
		return
	}
	src.mu.Lock()
	for tp := range rel {
		if commits[tp].meta != metaOwned+src.node {
			delete(rel, tp)
			if p := src.parts[tp]; p != nil && p.state == partRevoking {
				delete(src.parts, tp)
			} else if p != nil {
				p.claimed = false
			}
		}
	}
	src.mu.Unlock()
	if len(rel) == 0 {
		return
	}
	src.d.Log.Debug("kafka partitions releasing", slog.Any("partitions", fmt.Sprint(rel)))
	if err := src.commit(ctx, rel, metaReleased); err != nil {
		src.d.Limited.Log(slog.LevelWarn, "kafka release", "cannot release partitions in the group; retrying (their next holder waits)", slog.String("error", err.Error()))
		return
	}
	src.mu.Lock()
	for tp, pos := range rel {
		if p := src.parts[tp]; p != nil && p.state == partRevoking && p.stored == pos {
			delete(src.parts, tp)
		} else if p != nil {
			p.claimed = false // released; claimed again if assigned again
		}
	}
	src.mu.Unlock()
}

func (src *kafkaSource) kickTend() {
	select {
	case src.kick <- struct{}{}:
	default:
	}
}

// tend runs until stop: it releases settled revoked partitions, claims
// waiting ones, and commits the stored offsets of owned ones (so that
// the group's lag shows them).
func (src *kafkaSource) tend(stop chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		case <-src.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		src.releaseSettled(ctx)
		src.mu.Lock()
		var waiting []topicPart
		progress := map[topicPart]int64{}
		for tp, p := range src.parts {
			switch {
			case p.state == partWaiting:
				waiting = append(waiting, tp)
			case p.state == partOwned && p.stored > p.commit:
				progress[tp] = p.stored
			}
		}
		src.mu.Unlock()
		if len(waiting) > 0 {
			if commits, err := src.fetchCommits(ctx); err == nil {
				for _, tp := range waiting {
					if start, ok := src.claim(ctx, tp, commits[tp]); ok {
						src.pauseMu.Lock()
						src.client().SetOffsets(map[string]map[int32]kgo.EpochOffset{tp.topic: {tp.part: {Epoch: -1, Offset: start}}})
						src.client().ResumeFetchPartitions(map[string][]int32{tp.topic: {tp.part}})
						src.pauseMu.Unlock()
					}
				}
			}
		}
		if len(progress) > 0 {
			src.commitMu.Lock()
			src.mu.Lock()
			for tp := range progress {
				if p := src.parts[tp]; p == nil || p.state != partOwned {
					delete(progress, tp) // revoked meanwhile: its release says where it got to
				}
			}
			src.mu.Unlock()
			if err := src.commit(ctx, progress, metaOwned); err == nil {
				src.mu.Lock()
				for tp, pos := range progress {
					if p := src.parts[tp]; p != nil {
						p.commit = max(p.commit, pos)
					}
				}
				src.mu.Unlock()
			}
			src.commitMu.Unlock()
		}
		cancel()
	}
}
