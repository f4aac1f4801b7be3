// The IBM/sarama program of Sluice's client compatibility matrix
// (crates/sluice/tests/compat/matrix.rs; scenarios in compat/README.md).
//
//	sarama-compat --bootstrap HOST:PORT --prefix P [--scram-user U --scram-password W]
//
// Prints one `RESULT <scenario> PASS|FAIL|SKIP <detail>` line per scenario and
// exits 1 if any failed. Versions are pinned by go.mod and go.sum.
package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
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

// scramClient is sarama's SCRAMClient over xdg-go/scram, as in sarama's examples.
type scramClient struct {
	conversation *scram.ClientConversation
}

func (c *scramClient) Begin(user, password, authzID string) error {
	client, err := scram.HashGeneratorFcn(sha256.New).NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conversation = client.NewConversation()
	return nil
}

func (c *scramClient) Step(challenge string) (string, error) { return c.conversation.Step(challenge) }
func (c *scramClient) Done() bool                            { return c.conversation.Done() }

func config() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V4_1_0_0
	cfg.ClientID = *prefix + "-sarama"
	cfg.Net.DialTimeout = 10 * time.Second
	cfg.Net.ReadTimeout = 30 * time.Second
	cfg.Admin.Timeout = 30 * time.Second
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true
	cfg.Producer.Retry.Max = 10
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	cfg.Consumer.Group.Session.Timeout = 10 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = time.Second
	cfg.Metadata.Retry.Max = 10
	if *scramUser != "" {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		cfg.Net.SASL.User = *scramUser
		cfg.Net.SASL.Password = *scramPassword
		cfg.Net.SASL.Handshake = true
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &scramClient{} }
	}
	return cfg
}

func brokers() []string { return strings.Split(*bootstrap, ",") }

func values(tag string) map[string]bool {
	m := map[string]bool{}
	for i := 0; i < count; i++ {
		m[fmt.Sprintf("%s-%d", tag, i)] = true
	}
	return m
}

// describe waits (bounded) until topic has n partitions, each with a leader.
func describe(adm sarama.ClusterAdmin, topic string, n int) (*sarama.TopicMetadata, error) {
	end := time.Now().Add(30 * time.Second)
	for {
		metas, err := adm.DescribeTopics([]string{topic})
		if err == nil && len(metas) == 1 && metas[0].Err == sarama.ErrNoError && len(metas[0].Partitions) == n {
			ready := true
			for _, p := range metas[0].Partitions {
				ready = ready && p.Err == sarama.ErrNoError && p.Leader >= 0
			}
			if ready {
				return metas[0], nil
			}
		}
		if time.Now().After(end) {
			if err == nil && len(metas) == 1 {
				err = metas[0].Err
			}
			return nil, fmt.Errorf("no leaders for %s within 30 s: %v", topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func createTopic(adm sarama.ClusterAdmin, topic string, n int) (*sarama.TopicMetadata, error) {
	err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: int32(n), ReplicationFactor: 3}, false)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", topic, err)
	}
	return describe(adm, topic, n)
}

func setupTopic(topic string) error {
	adm, err := sarama.NewClusterAdmin(brokers(), config())
	if err != nil {
		return err
	}
	defer adm.Close()
	_, err = createTopic(adm, topic, partitions)
	return err
}

func messages(topic, tag string) []*sarama.ProducerMessage {
	var ms []*sarama.ProducerMessage
	for i := 0; i < count; i++ {
		ms = append(ms, &sarama.ProducerMessage{
			Topic:     topic,
			Partition: int32(i % partitions),
			Key:       sarama.StringEncoder(fmt.Sprintf("k-%d", i)),
			Value:     sarama.StringEncoder(fmt.Sprintf("%s-%d", tag, i)),
		})
	}
	return ms
}

// produce sends `<tag>-<i>` for i in 0..count, record i to partition i % partitions.
func produce(p sarama.SyncProducer, topic, tag string) error {
	return p.SendMessages(messages(topic, tag))
}

// handler consumes a group's claims until every wanted value was read,
// marking each record so that a commit stores the offsets after them.
type handler struct {
	mu        sync.Mutex
	missing   map[string]bool
	forbidden func(string) bool
	what      string
	commit    bool
	err       error
	done      chan struct{}
	closeOnce sync.Once
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			v := string(m.Value)
			h.mu.Lock()
			if h.forbidden(v) && h.err == nil {
				h.err = fmt.Errorf("%s: read %s at %s-%d@%d", h.what, v, m.Topic, m.Partition, m.Offset)
			}
			delete(h.missing, v)
			finished := len(h.missing) == 0 || h.err != nil
			h.mu.Unlock()
			s.MarkMessage(m, "")
			if finished {
				if h.commit && h.err == nil {
					// AutoCommit is off: a synchronous commit of every
					// offset marked in this session.
					s.Commit()
				}
				h.closeOnce.Do(func() { close(h.done) })
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

// consumeAll runs a member of group on topic until every value of wanted was
// read; fails if a value for which forbidden holds is read, or at the
// deadline. With commit, commits the marked offsets before it leaves.
func consumeAll(cfg *sarama.Config, group, topic string, wanted map[string]bool, forbidden func(string) bool, what string, commit bool) error {
	g, err := sarama.NewConsumerGroup(brokers(), group, cfg)
	if err != nil {
		return err
	}
	h := &handler{missing: map[string]bool{}, forbidden: forbidden, what: what, commit: commit, done: make(chan struct{})}
	for v := range wanted {
		h.missing[v] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	var sessionErr error
	var wg sync.WaitGroup
	wg.Add(1)
	var sessionMu sync.Mutex
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			err := g.Consume(ctx, []string{topic}, h)
			if err != nil && !errors.Is(err, sarama.ErrClosedConsumerGroup) {
				sessionMu.Lock()
				sessionErr = err
				sessionMu.Unlock()
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					time.Sleep(200 * time.Millisecond) // then join again, until the deadline
				}
			}
		}
	}()
	select {
	case <-h.done:
	case <-ctx.Done():
	}
	h.mu.Lock()
	left, failure := len(h.missing), h.err
	h.mu.Unlock()
	cancel()
	wg.Wait()
	if err := g.Close(); err != nil && failure == nil && left == 0 {
		failure = fmt.Errorf("close consumer group: %w", err)
	}
	if failure != nil {
		return failure
	}
	if left > 0 {
		sessionMu.Lock()
		defer sessionMu.Unlock()
		return fmt.Errorf("%s: %d of %d records not consumed within %v (last group error: %v)", what, left, len(wanted), deadline, sessionErr)
	}
	return nil
}

func groupConfig(isolation sarama.IsolationLevel) *sarama.Config {
	cfg := config()
	cfg.Consumer.IsolationLevel = isolation
	return cfg
}

func produceConsume() (string, error) {
	topic := *prefix + "-pc"
	if err := setupTopic(topic); err != nil {
		return "", err
	}
	p, err := sarama.NewSyncProducer(brokers(), config())
	if err != nil {
		return "", err
	}
	defer p.Close()
	if err := produce(p, topic, "pc"); err != nil {
		return "", err
	}
	err = consumeAll(groupConfig(sarama.ReadUncommitted), *prefix+"-pc-group", topic, values("pc"),
		func(v string) bool { return !strings.HasPrefix(v, "pc-") }, "consume", false)
	return fmt.Sprintf("%d records over %d partitions", count, partitions), err
}

func groupResume() (string, error) {
	topic, group := *prefix+"-grp", *prefix+"-grp-group"
	if err := setupTopic(topic); err != nil {
		return "", err
	}
	p, err := sarama.NewSyncProducer(brokers(), config())
	if err != nil {
		return "", err
	}
	defer p.Close()
	if err := produce(p, topic, "old"); err != nil {
		return "", err
	}
	if err := consumeAll(groupConfig(sarama.ReadUncommitted), group, topic, values("old"),
		func(v string) bool { return !strings.HasPrefix(v, "old-") }, "first consumer", true); err != nil {
		return "", err
	}
	if err := produce(p, topic, "new"); err != nil {
		return "", err
	}
	err = consumeAll(groupConfig(sarama.ReadUncommitted), group, topic, values("new"),
		func(v string) bool { return strings.HasPrefix(v, "old-") }, "resumed consumer (committed offsets not used)", false)
	return "second consumer resumed at the committed offsets", err
}

func adminScenario() (string, error) {
	topic := *prefix + "-adm"
	adm, err := sarama.NewClusterAdmin(brokers(), config())
	if err != nil {
		return "", err
	}
	defer adm.Close()
	meta, err := createTopic(adm, topic, 2)
	if err != nil {
		return "", err
	}
	for _, p := range meta.Partitions {
		// Through Sluice, replicas are the Sluice nodes that stand for them.
		if !slices.Contains(p.Replicas, p.Leader) {
			return "", fmt.Errorf("partition %d: leader %d not among %v", p.ID, p.Leader, p.Replicas)
		}
	}
	if err := adm.DeleteTopic(topic); err != nil {
		return "", fmt.Errorf("delete %s: %w", topic, err)
	}
	end := time.Now().Add(30 * time.Second)
	for {
		topics, err := adm.ListTopics()
		if err == nil {
			if _, listed := topics[topic]; !listed {
				break
			}
		}
		if time.Now().After(end) {
			return "", fmt.Errorf("%s still listed 30 s after deletion (%v)", topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "created, described (2 partitions with leaders), deleted", nil
}

func transaction() (string, error) {
	topic := *prefix + "-txn"
	if err := setupTopic(topic); err != nil {
		return "", err
	}
	cfg := config()
	cfg.Producer.Idempotent = true
	cfg.Producer.Transaction.ID = *prefix + "-txn-id"
	cfg.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer(brokers(), cfg)
	if err != nil {
		return "", fmt.Errorf("transactional producer: %w", err)
	}
	defer p.Close()
	for _, tag := range []string{"c", "a", "d"} {
		if err := p.BeginTxn(); err != nil {
			return "", fmt.Errorf("begin %s: %w", tag, err)
		}
		if err := produce(p, topic, tag); err != nil {
			return "", fmt.Errorf("produce %s: %w", tag, err)
		}
		if tag == "a" {
			err = p.AbortTxn()
		} else {
			err = p.CommitTxn()
		}
		if err != nil {
			return "", fmt.Errorf("end %s: %w", tag, err)
		}
	}
	committed := values("c")
	for v := range values("d") {
		committed[v] = true
	}
	err = consumeAll(groupConfig(sarama.ReadCommitted), *prefix+"-txn-group", topic, committed,
		func(v string) bool { return strings.HasPrefix(v, "a-") }, "read_committed consumer", false)
	return "2 committed, 1 aborted; read_committed saw exactly the committed records", err
}

func main() {
	flag.Parse()
	if *bootstrap == "" || *prefix == "" {
		fmt.Fprintln(os.Stderr, "--bootstrap and --prefix are required")
		os.Exit(2)
	}
	fmt.Printf("VERSION %s\n", moduleVersion("github.com/IBM/sarama"))
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
