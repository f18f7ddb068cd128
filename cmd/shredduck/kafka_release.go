package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/shredduck/shredduck/serve"
)

const kafkaReleaseUsage = `Usage: shredduck kafka-release --kafka-brokers HOST:PORT[,...] [--kafka-group G] --node NODE_ID [--force]

Releases the Kafka partitions a lost shredduck node owns in the consumer
group, so that the nodes assigned them stop waiting for it: each partition
the group's committed offsets say NODE_ID owns is committed as released at
its committed offset. It refuses while NODE_ID is a member of the group
(its session has not expired: it may still be running) unless --force,
which also fences a process still running under that id.

Use it only for a node whose database file is lost for good: a node
started again on its file releases its partitions by itself, at the offset
it stored, and loses nothing. What the lost node stored is gone with its
file, but for the hours it exported to --export-dir. The next holders start at the committed offsets, which trail what it
had stored by about its last transaction (it commits its progress after
each): those records are stored again, not lost. Should the file turn up
again, its records before the released offsets are their only copy (query
or export it), and those from the offsets on are in the next holders' files
too. The node's id is the holder in the other nodes' /readyz and
shredduck_kafka_partition_waiting, and node in its "consuming Kafka" log
line. See docs/SCALE-OUT.md.

Flags:
`

// kafkaReleaseEnv maps the flags to the variables serve reads too.
var kafkaReleaseEnv = map[string]string{
	"kafka-brokers": "SHREDDUCK_KAFKA_BROKERS",
	"kafka-group":   "SHREDDUCK_KAFKA_GROUP",
}

func runKafkaRelease(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kafka-release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("kafka-brokers", "", "Kafka brokers (host:port,...) of the group")
	group := fs.String("kafka-group", serve.DefaultKafkaGroup, "the nodes' consumer group")
	node := fs.String("node", "", "id of the lost node (its log's node, the group's owned:ID)")
	force := fs.Bool("force", false, "release even while the node is a member of the group, fencing it (its file must be lost: if it still runs, what it stored past the committed offsets is stored twice)")
	timeout := fs.Duration("timeout", time.Minute, "how long to try at most")
	noteEnv(fs, kafkaReleaseEnv)
	fs.Usage = func() {
		fmt.Fprint(stderr, kafkaReleaseUsage)
		fs.PrintDefaults()
	}
	if _, code, ok := parseFlags(fs, args, kafkaReleaseEnv, os.LookupEnv, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "shredduck kafka-release: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	if *brokers == "" || *node == "" {
		fmt.Fprintln(stderr, "shredduck kafka-release: --kafka-brokers and --node are required")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	r := &releaser{brokers: strings.Split(*brokers, ","), group: *group, node: *node, stdout: stdout}
	if err := r.run(ctx, *force); err != nil {
		fmt.Fprintf(stderr, "shredduck kafka-release: %v\n", err)
		return exitError
	}
	return exitOK
}

type releaser struct {
	brokers []string
	group   string
	node    string
	stdout  io.Writer
}

// partOffset is a partition's committed offset.
type partOffset struct {
	topic  string
	part   int32
	offset int64
}

// instanceID is the node's static member id, as serve sets it.
func (r *releaser) instanceID() string { return "shredduck-" + r.node }

func (r *releaser) options(more ...kgo.Opt) []kgo.Opt {
	// The commits carry metadata by topic name: OffsetCommit and
	// OffsetFetch from version 10 take topic ids instead.
	v := kversion.Stable()
	v.SetMaxKeyVersion(kmsg.OffsetCommit.Int16(), 9)
	v.SetMaxKeyVersion(kmsg.OffsetFetch.Int16(), 9)
	return append([]kgo.Opt{kgo.SeedBrokers(r.brokers...), kgo.MaxVersions(v)}, more...)
}

func (r *releaser) run(ctx context.Context, force bool) error {
	admin, err := kgo.NewClient(r.options()...)
	if err != nil {
		return err
	}
	defer admin.Close()
	live, err := r.member(ctx, admin)
	if err != nil {
		return err
	}
	if live != "" && !force {
		return fmt.Errorf("node %s is a member of group %s (%s): it may still be running. Stop it, or wait until its session expires (--kafka-session-timeout); --force releases anyway, only for a node whose file is lost", r.node, r.group, live)
	}
	owned, err := r.owned(ctx, admin)
	if err != nil {
		return err
	}
	if len(owned) == 0 {
		fmt.Fprintf(r.stdout, "node %s owns no partition of group %s: nothing to release\n", r.node, r.group)
		return nil
	}
	if err := r.release(ctx, admin, owned); err != nil {
		return err
	}
	for _, p := range owned {
		fmt.Fprintf(r.stdout, "released %s/%d at offset %d (was owned:%s)\n", p.topic, p.part, p.offset, r.node)
	}
	fmt.Fprintf(r.stdout, "%d partitions released; their next holders start at these offsets.\n"+
		"What node %s stored is gone with its database file, except the hours it exported (--export-dir);\n"+
		"the records it stored past these offsets are stored again by the next holders.\n"+
		"If the file turns up again, its records before these offsets are their only copy,\n"+
		"and those from them on are in the next holders' files too.\n", len(owned), r.node)
	return nil
}

// member describes the group's member of the node's instance id, or ""
// when the group has none.
func (r *releaser) member(ctx context.Context, cl *kgo.Client) (string, error) {
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{r.group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return "", fmt.Errorf("cannot describe group %s: %w", r.group, err)
	}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return "", fmt.Errorf("cannot describe group %s: %w", r.group, err)
		}
		for _, m := range g.Members {
			if m.InstanceID != nil && *m.InstanceID == r.instanceID() {
				return fmt.Sprintf("member %s from %s", m.MemberID, m.ClientHost), nil
			}
		}
	}
	return "", nil
}

// owned returns the partitions the group's metadata says the node owns,
// at their committed offsets.
func (r *releaser) owned(ctx context.Context, cl *kgo.Client) ([]partOffset, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = r.group
	req.RequireStable = true
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read the committed offsets of group %s: %w", r.group, err)
	}
	want := "owned:" + r.node
	var out []partOffset
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 && p.Metadata != nil && *p.Metadata == want {
				out = append(out, partOffset{t.Topic, p.Partition, p.Offset})
			}
		}
	}
	slices.SortFunc(out, func(a, b partOffset) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.part, b.part))
	})
	return out, nil
}

// release commits owned as released. Kafka takes commits only from a
// member of the group while it has members, so the command joins it
// under the node's own instance id (which fences a process still
// running as the node), commits, and removes that member again.
func (r *releaser) release(ctx context.Context, admin *kgo.Client, owned []partOffset) error {
	var topics []string
	for _, p := range owned {
		if !slices.Contains(topics, p.topic) {
			topics = append(topics, p.topic)
		}
	}
	cl, err := kgo.NewClient(r.options(kgo.ConsumerGroup(r.group), kgo.InstanceID(r.instanceID()), kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(), kgo.SessionTimeout(10*time.Second))...)
	if err != nil {
		return err
	}
	joined := false
	defer func() {
		cl.Close()
		if joined {
			if err := r.leave(admin); err != nil {
				fmt.Fprintf(r.stdout, "note: cannot remove this command's member from the group (%v); its partitions move to the other nodes when its session expires, within 10s\n", err)
			}
		}
	}()
	// Polling drives the join; the records fetched are not used.
	go func() {
		for ctx.Err() == nil {
			if cl.PollRecords(ctx, 1).IsClientClosed() {
				return
			}
		}
	}()
	for {
		member, gen := cl.GroupMetadata()
		if gen >= 0 {
			joined = true
			err := r.commit(ctx, cl, member, gen, owned)
			if err == nil {
				return nil
			}
			if !errors.Is(err, kerr.RebalanceInProgress) && !errors.Is(err, kerr.IllegalGeneration) && !errors.Is(err, kerr.UnknownMemberID) {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cannot join group %s to commit the releases: %w", r.group, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (r *releaser) commit(ctx context.Context, cl *kgo.Client, member string, gen int32, owned []partOffset) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.MemberID, req.Generation = r.group, member, gen
	id := r.instanceID()
	req.InstanceID = &id
	meta := "released:" + r.node
	for _, p := range owned {
		i := slices.IndexFunc(req.Topics, func(t kmsg.OffsetCommitRequestTopic) bool { return t.Topic == p.topic })
		if i < 0 {
			t := kmsg.NewOffsetCommitRequestTopic()
			t.Topic = p.topic
			req.Topics = append(req.Topics, t)
			i = len(req.Topics) - 1
		}
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.Metadata = p.part, p.offset, &meta
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("cannot commit to group %s: %w", r.group, err)
	}
	var errs []error
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				errs = append(errs, fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, err))
			}
		}
	}
	return errors.Join(errs...)
}

// leave removes the node's static member from the group at once (a
// static member does not leave when its client closes), so that its
// partitions go to the other nodes now rather than after its session.
func (r *releaser) leave(admin *kgo.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = r.group
	m := kmsg.NewLeaveGroupRequestMember()
	id := r.instanceID()
	m.InstanceID = &id
	req.Members = append(req.Members, m)
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return err
	}
	for _, m := range resp.Members {
		if err := kerr.ErrorForCode(m.ErrorCode); err != nil {
			return err
		}
	}
	return nil
}
