// The franz-go program of Sluice's client compatibility matrix
// (crates/sluice/tests/compat/matrix.rs; scenarios in compat/README.md).
//
//	franz-go-compat --bootstrap HOST:PORT --prefix P [--scram-user U --scram-password W]
//
// Prints one `RESULT <scenario> PASS|FAIL|SKIP <detail>` line per scenario and
// exits 1 if any failed. Versions are pinned by go.mod and go.sum.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

const (
	partitions = 3
	count      = 30
	deadline   = 60 * time.Second
)

var (
	bootstrap     = flag.String("bootstrap", "", "Sluice's address")
	prefix        = flag.String("prefix", "", "unique prefix of topics, groups and transactional ids")
	scramUser     = flag.String("scram-user", "", "SCRAM-SHA-256 user (SASL_PLAINTEXT); none: PLAINTEXT")
	scramPassword = flag.String("scram-password", "", "SCRAM-SHA-256 password")
)

func opts(extra ...kgo.Opt) []kgo.Opt {
	o := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*bootstrap, ",")...),
		kgo.ClientID(*prefix + "-franz-go"),
		kgo.RequestTimeoutOverhead(20 * time.Second),
		kgo.RetryTimeout(45 * time.Second),
	}
	if *scramUser != "" {
		o = append(o, kgo.SASL(scram.Auth{User: *scramUser, Pass: *scramPassword}.AsSha256Mechanism()))
	}
	return append(o, extra...)
}

func client(extra ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(opts(extra...)...)
}

func timeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), deadline)
}

func values(tag string) map[string]bool {
	m := map[string]bool{}
	for i := 0; i < count; i++ {
		m[fmt.Sprintf("%s-%d", tag, i)] = true
	}
	return m
}

// createTopic creates topic and waits (bounded) until every partition has a leader.
func createTopic(adm *kadm.Client, topic string, n int32) (kadm.TopicDetail, error) {
	ctx, cancel := timeout()
	defer cancel()
	resp, err := adm.CreateTopic(ctx, n, 3, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return kadm.TopicDetail{}, fmt.Errorf("create %s: %w", topic, err)
	}
	for {
		details, err := adm.ListTopics(ctx, topic)
		if err == nil {
			d := details[topic]
			ready := d.Err == nil && len(d.Partitions) == int(n)
			for _, p := range d.Partitions {
				ready = ready && p.Err == nil && p.Leader >= 0
			}
			if ready {
				return d, nil
			}
		}
		select {
		case <-ctx.Done():
			return kadm.TopicDetail{}, fmt.Errorf("no leaders for %s: %v", topic, details[topic])
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func setupTopic(topic string) error {
	c, err := client()
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = createTopic(kadm.NewClient(c), topic, partitions)
	return err
}

// produce sends `<tag>-<i>` for i in 0..count, record i to partition i % partitions.
func produce(c *kgo.Client, topic, tag string) error {
	ctx, cancel := timeout()
	defer cancel()
	var rs []*kgo.Record
	for i := 0; i < count; i++ {
		rs = append(rs, &kgo.Record{
			Topic:     topic,
			Partition: int32(i % partitions),
			Key:       []byte(fmt.Sprintf("k-%d", i)),
			Value:     []byte(fmt.Sprintf("%s-%d", tag, i)),
		})
	}
	return c.ProduceSync(ctx, rs...).FirstErr()
}

func producer(extra ...kgo.Opt) (*kgo.Client, error) {
	return client(append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}, extra...)...)
}

// consumeAll polls c until every value of wanted was read; fails if a value
// for which forbidden holds is read, or at the deadline.
func consumeAll(c *kgo.Client, wanted map[string]bool, forbidden func(string) bool, what string) error {
	ctx, cancel := timeout()
	defer cancel()
	missing := map[string]bool{}
	for v := range wanted {
		missing[v] = true
	}
	for len(missing) > 0 {
		fetches := c.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %d of %d records not consumed within %v", what, len(missing), len(wanted), deadline)
		}
		var fatal error
		fetches.EachError(func(t string, p int32, err error) {
			if !kerr.IsRetriable(err) && !errors.Is(err, context.DeadlineExceeded) {
				fatal = fmt.Errorf("%s: fetch %s-%d: %w", what, t, p, err)
			}
		})
		if fatal != nil {
			return fatal
		}
		var bad error
		fetches.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			if forbidden(v) && bad == nil {
				bad = fmt.Errorf("%s: read %s at %s-%d@%d", what, v, r.Topic, r.Partition, r.Offset)
			}
			delete(missing, v)
		})
		if bad != nil {
			return bad
		}
	}
	return nil
}

func groupConsumer(group, topic string, extra ...kgo.Opt) (*kgo.Client, error) {
	return client(append([]kgo.Opt{
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.SessionTimeout(10 * time.Second),
		kgo.HeartbeatInterval(time.Second),
	}, extra...)...)
}

func produceConsume() (string, error) {
	topic := *prefix + "-pc"
	if err := setupTopic(topic); err != nil {
		return "", err
	}
	p, err := producer()
	if err != nil {
		return "", err
	}
	defer p.Close()
	if err := produce(p, topic, "pc"); err != nil {
		return "", err
	}
	c, err := groupConsumer(*prefix+"-pc-group", topic)
	if err != nil {
		return "", err
	}
	defer c.Close()
	err = consumeAll(c, values("pc"), func(v string) bool { return !strings.HasPrefix(v, "pc-") }, "consume")
	return fmt.Sprintf("%d records over %d partitions", count, partitions), err
}

func groupResume() (string, error) {
	topic, group := *prefix+"-grp", *prefix+"-grp-group"
	if err := setupTopic(topic); err != nil {
		return "", err
	}
	p, err := producer()
	if err != nil {
		return "", err
	}
	defer p.Close()
	if err := produce(p, topic, "old"); err != nil {
		return "", err
	}
	first, err := groupConsumer(group, topic)
	if err != nil {
		return "", err
	}
	err = consumeAll(first, values("old"), func(v string) bool { return !strings.HasPrefix(v, "old-") }, "first consumer")
	if err == nil {
		ctx, cancel := timeout()
		err = first.CommitUncommittedOffsets(ctx)
		cancel()
	}
	first.Close() // leaves the group
	if err != nil {
		return "", err
	}
	if err := produce(p, topic, "new"); err != nil {
		return "", err
	}
	second, err := groupConsumer(group, topic)
	if err != nil {
		return "", err
	}
	defer second.Close()
	err = consumeAll(second, values("new"), func(v string) bool { return strings.HasPrefix(v, "old-") },
		"resumed consumer (committed offsets not used)")
	return "second consumer resumed at the committed offsets", err
}

func adminScenario() (string, error) {
	topic := *prefix + "-adm"
	c, err := client()
	if err != nil {
		return "", err
	}
	defer c.Close()
	adm := kadm.NewClient(c)
	d, err := createTopic(adm, topic, 2)
	if err != nil {
		return "", err
	}
	for _, p := range d.Partitions {
		// Through Sluice, replicas are the Sluice nodes that stand for them.
		if !slices.Contains(p.Replicas, p.Leader) {
			return "", fmt.Errorf("partition %d: leader %d not among %v", p.Partition, p.Leader, p.Replicas)
		}
	}
	ctx, cancel := timeout()
	defer cancel()
	resp, err := adm.DeleteTopics(ctx, topic)
	if err == nil {
		err = resp[topic].Err
	}
	if err != nil {
		return "", fmt.Errorf("delete %s: %w", topic, err)
	}
	for {
		topics, err := adm.ListTopics(ctx)
		if err == nil && !topics.Has(topic) {
			break
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s still listed after deletion", topic)
		case <-time.After(200 * time.Millisecond):
		}
	}
	return "created, described (2 partitions with leaders), deleted", nil
}

func transaction() (string, error) {
	topic := *prefix + "-txn"
	if err := setupTopic(topic); err != nil {
		return "", err
	}
	p, err := producer(kgo.TransactionalID(*prefix + "-txn-id"))
	if err != nil {
		return "", err
	}
	defer p.Close()
	for _, tag := range []string{"c", "a", "d"} {
		if err := p.BeginTransaction(); err != nil {
			return "", fmt.Errorf("begin %s: %w", tag, err)
		}
		if err := produce(p, topic, tag); err != nil {
			return "", fmt.Errorf("produce %s: %w", tag, err)
		}
		ctx, cancel := timeout()
		err := p.EndTransaction(ctx, kgo.TransactionEndTry(tag != "a"))
		cancel()
		if err != nil {
			return "", fmt.Errorf("end %s: %w", tag, err)
		}
	}
	c, err := groupConsumer(*prefix+"-txn-group", topic, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return "", err
	}
	defer c.Close()
	committed := values("c")
	for v := range values("d") {
		committed[v] = true
	}
	err = consumeAll(c, committed, func(v string) bool { return strings.HasPrefix(v, "a-") }, "read_committed consumer")
	return "2 committed, 1 aborted; read_committed saw exactly the committed records", err
}

func main() {
	flag.Parse()
	if *bootstrap == "" || *prefix == "" {
		fmt.Fprintln(os.Stderr, "--bootstrap and --prefix are required")
		os.Exit(2)
	}
	fmt.Printf("VERSION %s\n", moduleVersion("github.com/twmb/franz-go"))
	failed := false
	for _, s := range []struct {
		name string
		run  func() (string, error)
	}{
		{"produce-consume", produceConsume},
		{"group-resume", groupResume},
		{"admin", adminScenario},
		{"transaction", transaction},
	} {
		detail, err := s.run()
		if err != nil {
			failed = true
			fmt.Printf("RESULT %s FAIL %s\n", s.name, strings.ReplaceAll(err.Error(), "\n", " "))
		} else {
			fmt.Printf("RESULT %s PASS %s\n", s.name, detail)
		}
	}
	if failed {
		os.Exit(1)
	}
}

// moduleVersion is the version of module path this binary was built with.
func moduleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == path {
				return m.Version
			}
		}
	}
	return path + " (unknown version)"
}
