package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadInputIsRefusedWithAMessage: the mistakes a careless user makes get
// exit 2 and a message saying what is wrong, never a silent default or a
// whole-index answer. README's table of bad inputs lists the same cases.
func TestBadInputIsRefusedWithAMessage(t *testing.T) {
	warehouse, _ := ordersTable(t, 20)
	c := newCLI(t, warehouse, "")
	createIndexes(t, c, "test.orders")
	c.ok("build", "--table", "test.orders", "--index", "pk")
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	deep := "id"
	for range 65 {
		deep = "identity(" + deep + ")"
	}
	deepDef := write("deep.json", fmt.Sprintf(`{"name":"deep","identity":["id"],"materialized":[%q],"cluster":["id"]}`, deep))
	retain := write("retain.yaml", "run:\n  retain-snapshots: -5\n")
	sasl := write("sasl.yaml", "run:\n  kafka:\n    sasl:\n      mechanism: GSSAPI\n      username: u\n")
	tlsHalf := write("tls.yaml", "serve:\n  tls-cert-file: cert.pem\n")
	blank := write("blank.txt", " \n\t ")
	stage := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lookup", "--table", "test.orders", "--index", "pk", "--where", "   "}, "--where is blank"},
		{[]string{"lookup", "--table", "test.orders", "--index", "pk", "--where-file", blank}, "is blank"},
		{[]string{"lookup", "--table", "test.orders", "--index", "pk", "--where", "id = 1", "--where-file", blank}, "not both"},
		{[]string{"lookup", "--table", "test.orders", "--index", "pk"}, "missing --where"},
		{[]string{"lookup", "--table", "test.orders", "--index", "pk", "--where-file", filepath.Join(dir, "nope")}, "no such file"},
		{[]string{"run", "--once", "--table", "test.orders", "--index", "pk", "--stage-dir", stage, "--poll-interval", "0"}, "run.poll-interval 0s: want a positive duration"},
		{[]string{"run", "--once", "--table", "test.orders", "--index", "pk", "--stage-dir", stage, "--poll-interval", "-1s"}, "run.poll-interval -1s: want a positive duration"},
		{[]string{"run", "--once", "--table", "test.orders", "--index", "pk", "--stage-dir", stage, "--config", retain}, "run.retain-snapshots -5: want at least 1"},
		{[]string{"gen-table", "--table", "test.more", "--upsert", "-5"}, "--upsert -5"},
		{[]string{"list", "--table", "test.nope"}, "test.nope"},
		{[]string{"create", "--table", "test.orders", "--def", deepDef}, "nest function applications more than 64 deep"},
		{[]string{"rollback", "--table", "test.orders", "--index", "pk", "--to", "somewhere/else"}, "want an index snapshot id or a metadata file location"},
		{[]string{"expire", "--table", "test.orders", "--index", "pk", "--retain-last", "-3"}, "--retain-last -3: want at least 1"},
		{[]string{"expire", "--table", "test.orders", "--index", "pk", "--retain-last", "0"}, "--retain-last 0: want at least 1"},
		{[]string{"rewrite-deletes", "--table", "test.orders", "--min-files", "0"}, "--min-files 0: want at least 1"},
		{[]string{"notify", "--table", "test.orders"}, "no Kafka brokers: give --kafka-brokers or run.kafka.brokers"},
		{[]string{"notify", "--table", "test.orders", "--kafka-brokers", "127.0.0.1:1", "--offsets", "[1]"}, "offsets must be an object"},
		{[]string{"run", "--once", "--table", "test.orders", "--index", "pk", "--stage-dir", stage, "--config", sasl}, `run.kafka.sasl.mechanism "GSSAPI"`},
		{[]string{"serve", "--config", tlsHalf}, "serve.tls-cert-file and serve.tls-key-file: give both or neither"},
	} {
		code, out, errs := c.run(tc.args...)
		if code != exitError || !strings.Contains(errs, tc.want) {
			t.Errorf("streamidx %s: exit %d, want %d and a message holding %q\n%s%s", strings.Join(tc.args, " "), code, exitError, tc.want, out, errs)
		}
	}
	if code, _, errs := c.run("list", "--table", "test.orders"); code != exitOK || strings.Contains(errs, "deep") {
		t.Errorf("a refused definition was registered: exit %d\n%s", code, errs)
	}
}

// TestPredicateFromFileOrStandardInput: a predicate longer than a command
// line can carry (an IN list of 20,000 keys, about 200 KiB) is given with
// --where-file or on standard input with --where -.
func TestPredicateFromFileOrStandardInput(t *testing.T) {
	warehouse, _ := ordersTable(t, 50)
	c := newCLI(t, warehouse, "")
	createIndexes(t, c, "test.orders")
	c.ok("build", "--table", "test.orders", "--index", "pk")
	keys := []string{"7", "42"}
	for i := range 20_000 {
		keys = append(keys, fmt.Sprint(1_000_000+i))
	}
	pred := "id IN (" + strings.Join(keys, ", ") + ")"
	if len(pred) <= 128<<10 {
		t.Fatalf("the predicate is only %d bytes", len(pred))
	}
	path := filepath.Join(t.TempDir(), "where.txt")
	if err := os.WriteFile(path, []byte(pred+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := c.ok("lookup", "--table", "test.orders", "--index", "pk", "--where-file", path); !strings.Contains(out, "(2 rows)") {
		t.Errorf("--where-file: %s", out)
	}
	stdin = strings.NewReader(pred)
	defer func() { stdin = os.Stdin }()
	if out := c.ok("lookup", "--table", "test.orders", "--index", "pk", "--where", "-"); !strings.Contains(out, "(2 rows)") {
		t.Errorf("--where -: %s", out)
	}
}
