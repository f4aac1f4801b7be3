// A chained consume-transform-produce workload (an ETL) through Sluice, with
// franz-go: records go into a source topic; in each chain a group consumes
// them and produces each to a second topic, a second group does the same
// into a third, and a checking consumer reads the third and requires every
// record exactly once. The chains run at once, with different group
// protocols: classic range, classic cooperative-sticky with static members,
// KIP-848 (consumer protocol), and transactional variants (consume, produce
// and commit offsets inside one transaction; read_committed) of a classic
// cooperative-sticky group and of a KIP-848 group. In every stage members
// join and leave while it runs, and each member cuts its fetch connections
// while it processes (see cut.go), so that franz-go fetches again on a new
// connection naming its old fetch session.
//
//	franz-go-etl --bootstrap HOST:PORT --prefix P [--records N] [--timeout D]
//	             [--cut-every D] [--chains NAME,...]
//
// Prints `RESULT <chain> PASS|FAIL <detail>` per chain and
// `etl: N passed, N failed`; exits 1 if any chain failed or the workload
// did not finish within --timeout. A chain that cut fewer than two fetch
// connections (one per stage) fails: it did not test reconnects. Versions
// are pinned by go.mod and go.sum.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

var (
	bootstrap = flag.String("bootstrap", "", "Sluice's address")
	prefix    = flag.String("prefix", "", "unique prefix of topics, groups and transactional ids")
	records   = flag.Int("records", 20000, "records produced into the source topic")
	timeout   = flag.Duration("timeout", 150*time.Second, "the whole workload's limit")
	cutEvery  = flag.Duration("cut-every", 2*time.Second, "how often a processing member cuts its fetch connections (0: never)")
	only      = flag.String("chains", "", "the chains to run, separated by commas (default: all)")
)

const partitions = 6

type chain struct {
	name     string
	balancer kgo.GroupBalancer
	kip848   bool
	static   bool
	txn      bool
	cuts     *Cuts // the chain's fetch connections cut
}

var chains = []chain{
	{name: "range", balancer: kgo.RangeBalancer()},
	{name: "cooperative-sticky-static", balancer: kgo.CooperativeStickyBalancer(), static: true},
	{name: "kip848-range", balancer: kgo.RangeBalancer(), kip848: true},
	{name: "txn-cooperative-sticky", balancer: kgo.CooperativeStickyBalancer(), txn: true},
	{name: "txn-kip848", balancer: kgo.RangeBalancer(), kip848: true, txn: true},
}

// selected is the chains to run: those named in --chains, or all; a name
// that is no chain's is refused.
func selected() ([]chain, error) {
	var out []chain
	names := strings.Split(*only, ",")
	for _, c := range chains {
		if *only == "" || slices.Contains(names, c.name) {
			c.cuts = new(Cuts)
			out = append(out, c)
		}
	}
	for _, name := range names {
		if *only != "" && !slices.ContainsFunc(chains, func(c chain) bool { return c.name == name }) {
			return nil, fmt.Errorf("no chain named %q in --chains %q", name, *only)
		}
	}
	return out, nil
}

func base(extra ...kgo.Opt) []kgo.Opt {
	o := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*bootstrap, ",")...),
		kgo.ClientID(*prefix + "-etl"),
		kgo.UnknownTopicRetries(-1),
		kgo.RetryTimeout(60 * time.Second),
	}
	return append(o, extra...)
}

func main() {
	flag.Parse()
	if *bootstrap == "" || *prefix == "" {
		fmt.Fprintln(os.Stderr, "usage: franz-go-etl --bootstrap HOST:PORT --prefix P")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	started := time.Now()
	chains, err := selected()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	source := *prefix + "-source"
	var topics []string
	topics = append(topics, source)
	for _, c := range chains {
		topics = append(topics, topicOf(c, 2), topicOf(c, 3))
	}
	if err := createTopics(ctx, topics); err != nil {
		fmt.Printf("etl: cannot create topics: %v\n", err)
		fmt.Println("etl: 0 passed, 1 failed")
		os.Exit(1)
	}
	produceErr := make(chan error, 1)
	go func() { produceErr <- produceSource(ctx, source) }()

	results := make([]error, len(chains))
	var wg sync.WaitGroup
	for i, c := range chains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runChain(ctx, c, source)
		}()
	}
	wg.Wait()
	passed, failed := 0, 0
	if err := <-produceErr; err != nil {
		fmt.Printf("RESULT source-producer FAIL %v\n", err)
		failed++
	}
	for i, c := range chains {
		if results[i] == nil && *cutEvery > 0 && c.cuts.total() < 2 {
			// Each stage cuts after its first poll with records.
			results[i] = fmt.Errorf("only %d fetch connections were cut (at least one per stage expected)", c.cuts.total())
		}
		if results[i] != nil {
			fmt.Printf("RESULT %s FAIL %v\n", c.name, results[i])
			failed++
		} else {
			fmt.Printf("RESULT %s PASS %d records exactly once\n", c.name, *records)
			passed++
		}
	}
	fmt.Printf("etl: %d chains, %d records each, %.1fs\n", len(chains), *records, time.Since(started).Seconds())
	fmt.Printf("etl: fetch connections cut: %d with ss -K, %d closed in the process\n", cuts.Killed.Load(), cuts.Closed.Load())
	fmt.Printf("etl: %d passed, %d failed\n", passed, failed)
	if failed > 0 {
		os.Exit(1)
	}
}

// pickChains keeps only the chains named in list (all when it is empty).
func topicOf(c chain, stage int) string { return fmt.Sprintf("%s-%s-%d", *prefix, c.name, stage) }

func createTopics(ctx context.Context, topics []string) error {
	cl, err := kgo.NewClient(base()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// With a broker down (killed, or hung and fenced) RF 3 cannot be placed:
	// retried until it is back. A retried create may find its topic made.
	for {
		resp, err := adm.CreateTopics(ctx, partitions, 3, nil, topics...)
		if err != nil {
			return err
		}
		var again []string
		for _, t := range resp.Sorted() {
			switch {
			case t.Err == nil, errors.Is(t.Err, kerr.TopicAlreadyExists):
			case errors.Is(t.Err, kerr.InvalidReplicationFactor):
				again = append(again, t.Topic)
			default:
				return fmt.Errorf("%s: %w", t.Topic, t.Err)
			}
		}
		if len(again) == 0 {
			return nil
		}
		topics = again
		select {
		case <-ctx.Done():
			return fmt.Errorf("%v: fewer than 3 brokers until the deadline", again)
		case <-time.After(time.Second):
		}
	}
}

func produceSource(ctx context.Context, topic string) error {
	cl, err := kgo.NewClient(base(kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	var first atomic.Pointer[error]
	for i := range *records {
		r := &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("etl")}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				first.CompareAndSwap(nil, &err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	if e := first.Load(); e != nil {
		return fmt.Errorf("produce: %w", *e)
	}
	return nil
}

// runChain runs the two transform stages and the checking stage of c.
func runChain(ctx context.Context, c chain, source string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 16)
	var stages sync.WaitGroup
	for stage, from := range []string{source, topicOf(c, 2)} {
		to := topicOf(c, stage+2)
		group := fmt.Sprintf("%s-%s-g%d", *prefix, c.name, stage+1)
		stages.Add(1)
		go func() {
			defer stages.Done()
			runStage(ctx, c, group, from, to, errs)
		}()
	}
	checked := make(chan error, 1)
	go func() { checked <- check(ctx, c, topicOf(c, 3)) }()
	select {
	case err := <-checked:
		cancel()
		stages.Wait()
		if err != nil {
			return err
		}
		select {
		case err := <-errs:
			return err
		default:
			return nil
		}
	case err := <-errs:
		cancel()
		stages.Wait()
		return err
	}
}

// runStage keeps the stage's members coming and going until ctx ends: one
// member stays throughout; others join, process a while and leave, one
// after another, so that the group rebalances again and again.
func runStage(ctx context.Context, c chain, group, from, to string, errs chan<- error) {
	var members sync.WaitGroup
	var n atomic.Int32
	start := func(life time.Duration) {
		id := n.Add(1)
		members.Add(1)
		go func() {
			defer members.Done()
			mctx, mcancel := context.WithTimeout(ctx, life)
			defer mcancel()
			if err := member(mctx, c, group, id, from, to); err != nil && ctx.Err() == nil {
				errs <- fmt.Errorf("%s member %d: %w", group, id, err)
			}
		}()
	}
	start(24 * time.Hour)
	for i := 0; ctx.Err() == nil && i < 4; i++ {
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
			start(3 * time.Second)
		}
	}
	members.Wait()
}

// member consumes from `from` in `group` and produces each record to `to`,
// committing what it produced (in the transaction, for a transactional
// chain) before it lets a rebalance happen; it leaves the group when mctx
// ends.
func member(mctx context.Context, c chain, group string, id int32, from, to string) error {
	cut := &cutter{chain: c.cuts}
	opts := base(
		kgo.Dialer(cut.conns.dial),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(from),
		kgo.Balancers(c.balancer),
		kgo.SessionTimeout(20*time.Second),
		kgo.DefaultProduceTopic(to),
		kgo.DisableAutoCommit(),
	)
	if c.static {
		instance := fmt.Sprintf("%s-%d", group, id)
		opts = append(opts, kgo.InstanceID(instance))
		// A static member does not leave its group when it closes (its
		// partitions wait out the session timeout): it is removed as an
		// operator would, once closed.
		defer leaveStatic(group, instance)
	}
	if c.kip848 {
		opts = append(opts, kgo.ServerSideBalancer())
	}
	if c.txn {
		opts = append(opts,
			kgo.TransactionalID(fmt.Sprintf("%s-%d", group, id)),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.TransactionTimeout(60*time.Second),
		)
		// No BlockRebalanceOnPoll here: End aborts a transaction during
		// which a rebalance revoked partitions, and the session rewinds to
		// the committed offsets. (A transact session that blocks
		// rebalances on poll must allow them again itself, or rebalances
		// and its Close wait until the group gives up on it.)
		return txnMember(mctx, opts, cut)
	}
	// Everything polled is produced and committed before the next poll,
	// and a rebalance waits for that: no record is processed twice.
	opts = append(opts, kgo.BlockRebalanceOnPoll())
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer closeWithin(cl.CloseAllowingRebalance)
	for mctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(mctx, 500*time.Millisecond)
		fetches := cl.PollFetches(pctx)
		pcancel()
		if err := fatal(fetches); err != nil {
			cl.AllowRebalance()
			return err
		}
		recs := fetches.Records()
		if len(recs) > 0 {
			out := make([]*kgo.Record, 0, len(recs))
			for _, r := range recs {
				out = append(out, &kgo.Record{Key: r.Key, Value: r.Value})
			}
			wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
			err := cl.ProduceSync(wctx, out...).FirstErr()
			if err == nil {
				err = cl.CommitRecords(wctx, recs...)
			}
			wcancel()
			if err != nil {
				cl.AllowRebalance()
				return fmt.Errorf("produce or commit: %w", err)
			}
			cut.processed()
		}
		cl.AllowRebalance()
	}
	return nil
}

func txnMember(mctx context.Context, opts []kgo.Opt, cut *cutter) error {
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return err
	}
	defer closeWithin(sess.Close)
	for mctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(mctx, 500*time.Millisecond)
		fetches := sess.PollFetches(pctx)
		pcancel()
		if err := fatal(fetches); err != nil {
			return err
		}
		recs := fetches.Records()
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return fmt.Errorf("begin: %w", err)
		}
		wctx, wcancel := context.WithTimeout(context.Background(), 60*time.Second)
		for _, r := range recs {
			sess.Produce(wctx, &kgo.Record{Key: r.Key, Value: r.Value}, nil)
		}
		// End flushes, commits the offsets polled in the transaction and
		// commits it; a rebalance meanwhile aborts it, and the records are
		// consumed again by their next owner: still exactly once.
		_, err := sess.End(wctx, kgo.TryCommit)
		wcancel()
		if err != nil {
			return fmt.Errorf("end transaction: %w", err)
		}
		cut.processed()
	}
	return nil
}

// fatal is the first error of fetches other than the poll's own deadline.
func fatal(fetches kgo.Fetches) error {
	for _, e := range fetches.Errors() {
		if errors.Is(e.Err, context.DeadlineExceeded) || errors.Is(e.Err, context.Canceled) {
			continue
		}
		return fmt.Errorf("fetch %s/%d: %w", e.Topic, e.Partition, e.Err)
	}
	return nil
}

// check reads the chain's last topic (read_committed) until every key has
// arrived, and fails on a key seen twice.
func check(ctx context.Context, c chain, topic string) error {
	cl, err := kgo.NewClient(base(
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	seen := make([]bool, *records)
	got := 0
	for got < *records {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("%d of %d records arrived before the deadline", got, *records)
		}
		if err := fatal(fetches); err != nil {
			return err
		}
		for _, r := range fetches.Records() {
			k, err := strconv.Atoi(string(r.Key))
			if err != nil || k < 0 || k >= *records {
				return fmt.Errorf("unexpected key %q", r.Key)
			}
			if seen[k] {
				return fmt.Errorf("record %d arrived twice (partition %d offset %d)", k, r.Partition, r.Offset)
			}
			seen[k] = true
			got++
		}
	}
	// Nothing more may follow: a late duplicate within a short wait fails.
	lctx, lcancel := context.WithTimeout(ctx, 3*time.Second)
	defer lcancel()
	for _, r := range cl.PollFetches(lctx).Records() {
		return fmt.Errorf("record %s arrived again after all had arrived", r.Key)
	}
	return nil
}

// leaveStatic removes the closed static member `instance` from `group`.
func leaveStatic(group, instance string) {
	cl, err := kgo.NewClient(base()...)
	if err != nil {
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = kadm.NewClient(cl).LeaveGroup(ctx, kadm.LeaveGroup(group).InstanceIDs(instance))
}

// closeWithin closes a member's client, waiting at most 15 s: a close that
// hangs (leaving the group, aborting a transaction) must not keep the
// workload from reporting; the member's group moves on without it.
func closeWithin(close func()) {
	done := make(chan struct{})
	go func() {
		close()
		done <- struct{}{}
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		fmt.Println("etl: a member's client did not close within 15s")
	}
}
