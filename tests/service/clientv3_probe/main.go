// clientv3_probe runs go.etcd.io/etcd/client/v3's concurrency package (Mutex and Election) against an
// etcd endpoint and prints one JSON object of what it saw; tests/service/test_etcd_clientv3.py checks it.
// Built by `make etcd-clientv3-probe` into .cache/etcd-clientv3 (never committed).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// How long any one step may take before the run fails (a loaded 2-core machine is slow).
const wait = 60 * time.Second

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func session(cli *clientv3.Client) *concurrency.Session {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	must(err)
	return s
}

func main() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{os.Args[1]}, DialTimeout: wait})
	must(err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*wait)
	defer cancel()
	seen := map[string]interface{}{}

	// Mutex: the second session cannot have the lock while the first holds it, then gets it.
	first, second := session(cli), session(cli)
	m1, m2 := concurrency.NewMutex(first, "/probe/lock"), concurrency.NewMutex(second, "/probe/lock")
	must(m1.Lock(ctx))
	seen["second_trylock_while_held"] = fmt.Sprint(m2.TryLock(ctx))
	locked := make(chan error, 1)
	go func() { locked <- m2.Lock(ctx) }()
	must(m1.Unlock(ctx))
	must(<-locked)
	seen["second_holds"] = m2.Key()
	seen["first_key"] = m1.Key()
	must(m2.Unlock(ctx))

	// Election: alice leads, bob waits; alice's session closes (its lease revoked): bob leads.
	alice, bob := session(cli), session(cli)
	ea, eb := concurrency.NewElection(alice, "/probe/election"), concurrency.NewElection(bob, "/probe/election")
	must(ea.Campaign(ctx, "alice"))
	leader, err := ea.Leader(ctx)
	must(err)
	seen["leader_first"] = string(leader.Kvs[0].Value)
	won := make(chan error, 1)
	go func() { won <- eb.Campaign(ctx, "bob") }()
	observe := eb.Observe(ctx)
	seen["observed_first"] = string((<-observe).Kvs[0].Value)
	must(ea.Proclaim(ctx, "alice-again"))
	seen["observed_proclaim"] = string((<-observe).Kvs[0].Value)
	must(alice.Close()) // revokes alice's lease: her key goes with it
	must(<-won)
	leader, err = eb.Leader(ctx)
	must(err)
	seen["leader_after"] = string(leader.Kvs[0].Value)
	must(eb.Resign(ctx))
	_, err = eb.Leader(ctx)
	seen["after_resign"] = fmt.Sprint(err)

	out, err := json.Marshal(seen)
	must(err)
	fmt.Println(string(out))
}
