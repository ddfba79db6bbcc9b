package testtables

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// CDC is a change-data pipeline in a test, on a table of OrdersSchema: it
// keeps the table's live rows, makes random changes (inserts, updates that
// move rows between clustering keys, deletes), commits each batch of them
// to the table with iceberg-go as an upsert sink does (equality deletes by
// id for the rows that changed, appends of their new versions), and
// returns the change events a CDC source would have written for them, in
// order, in the form asked for.
type CDC struct {
	// Rows are the live rows by id.
	Rows    map[int64][]any
	r       *rand.Rand
	next    int64
	table   string
	variant int
}

// EventForm is the encoding of the change events CDC writes.
type EventForm int

// Event forms.
const (
	// Debezium writes Debezium envelopes without a schema (timestamps as
	// micros, decimals as base64 bytes).
	Debezium EventForm = iota
	// DebeziumSchema writes Debezium envelopes with their schema
	// (timestamps as ZonedTimestamp strings, decimals with their scale).
	DebeziumSchema
	// Native writes streamidx's native JSON events.
	Native
)

// CDCEvent is one record of the change topic.
type CDCEvent struct {
	ID    int64  // the row's id; records of one id go to one partition
	Key   []byte // the row key, as Debezium writes it
	Value []byte // nil for a tombstone
}

// NewCDC starts a pipeline over a table named tableName (NS.T) whose live
// rows are rows; new ids count up from the largest one.
func NewCDC(seed uint64, tableName string, rows [][]any) *CDC {
	c := &CDC{Rows: map[int64][]any{}, r: rand.New(rand.NewPCG(seed, seed^0x5eed)), table: tableName}
	for _, row := range rows {
		id := row[0].(int64)
		c.Rows[id] = row
		c.next = max(c.next, id+1)
	}
	return c
}

// randomRow makes a row for id with random values of every kind the
// orders fixture holds: null customers and names, special doubles.
func (c *CDC) randomRow(id int64) []any {
	var customer, name, score any = int64(c.r.IntN(9)), orderNames[c.r.IntN(len(orderNames))], float64(c.r.IntN(2000))/8 - 100
	if c.r.IntN(8) == 0 {
		customer = nil
	}
	if c.r.IntN(10) == 0 {
		name = nil
	}
	switch c.r.IntN(12) {
	case 0:
		score = math.NaN()
	case 1:
		score = math.Inf(1)
	case 2:
		score = math.Inf(-1)
	case 3:
		score = math.Copysign(0, -1)
	case 4:
		score = nil
	}
	ts := OrdersDay0.Add(time.Duration(c.r.IntN(1_000_000)) * time.Second).UnixMicro()
	return []any{id, customer, name, score, ts, decimal128.FromI64(int64(c.r.IntN(2_000_000) - 1_000_000))}
}

// change is one change event before encoding.
type change struct {
	op            string // c, u, d
	before, after []any
}

// Commit makes n random changes, commits them to tbl and returns the
// committed table and the change events of the commit, in order (a delete
// is followed by a tombstone, as Debezium writes it).
func (c *CDC) Commit(t testing.TB, tbl *table.Table, n int, form EventForm) (*table.Table, []CDCEvent) {
	t.Helper()
	c.variant++
	var changes []change
	existed := map[int64]bool{} // ids live before the commit that it changed
	ids := slices.Sorted(maps.Keys(c.Rows))
	for range n {
		switch k := c.r.IntN(10); {
		case k < 4 || len(ids) == 0: // insert, sometimes updated again in the same commit
			id := c.next
			c.next++
			row := c.randomRow(id)
			changes = append(changes, change{op: "c", after: row})
			if k == 0 {
				nw := c.randomRow(id)
				changes = append(changes, change{op: "u", before: row, after: nw})
				row = nw
			}
			c.Rows[id] = row
			ids = append(ids, id)
		case k < 8: // update: new values, usually a new clustering key
			id := ids[c.r.IntN(len(ids))]
			old := c.Rows[id]
			nw := c.randomRow(id)
			if k == 7 { // only the score
				nw = slices.Clone(old)
				nw[3] = float64(c.r.IntN(100))
			}
			changes = append(changes, change{op: "u", before: old, after: nw})
			if !c.isNew(changes, id) {
				existed[id] = true
			}
			c.Rows[id] = nw
		default: // delete
			i := c.r.IntN(len(ids))
			id := ids[i]
			changes = append(changes, change{op: "d", before: c.Rows[id]})
			if !c.isNew(changes, id) {
				existed[id] = true
			}
			delete(c.Rows, id)
			ids = slices.Delete(ids, i, i+1)
		}
	}
	// The commit: equality deletes of the ids that were live before and
	// changed, appends of the live versions of every id the commit touched.
	touched := map[int64]bool{}
	for _, ch := range changes {
		row := ch.after
		if row == nil {
			row = ch.before
		}
		touched[row[0].(int64)] = true
	}
	var dels, adds [][]any
	for _, id := range slices.Sorted(maps.Keys(existed)) {
		dels = append(dels, []any{id})
	}
	for _, id := range slices.Sorted(maps.Keys(touched)) {
		if row, live := c.Rows[id]; live {
			adds = append(adds, row)
		}
	}
	switch {
	case len(dels) > 0 && len(adds) > 0:
		del := WriteEqualityDeleteFile(t, tbl, 0, nil, []int{1}, dels...)
		tbl, _ = AppendAndDelete(t, tbl, []iceberg.DataFile{del}, adds...)
	case len(dels) > 0:
		tbl = AddEqualityDeletes(t, tbl, []int{1}, dels...)
	default:
		tbl, _ = Append(t, tbl, adds...)
	}
	var events []CDCEvent
	for _, ch := range changes {
		row := ch.after
		if row == nil {
			row = ch.before
		}
		id := row[0].(int64)
		key := fmt.Appendf(nil, `{"id":%d}`, id)
		events = append(events, CDCEvent{ID: id, Key: key, Value: c.encode(ch, form)})
		if ch.op == "d" && form != Native {
			events = append(events, CDCEvent{ID: id, Key: key})
		}
	}
	return tbl, events
}

// isNew reports whether id was inserted by an earlier change of changes.
func (c *CDC) isNew(changes []change, id int64) bool {
	for _, ch := range changes {
		if ch.op == "c" && ch.after[0].(int64) == id {
			return true
		}
	}
	return false
}

// encode writes one change event.
func (c *CDC) encode(ch change, form EventForm) []byte {
	img := func(row []any) string {
		if row == nil {
			return "null"
		}
		return c.image(row, form)
	}
	switch form {
	case Native:
		if ch.op == "d" {
			return fmt.Appendf(nil, `{"op":"delete","table":%q,"row":%s}`, c.table, img(ch.before))
		}
		if ch.before != nil {
			return fmt.Appendf(nil, `{"op":"upsert","table":%q,"row":%s,"before":%s}`, c.table, img(ch.after), img(ch.before))
		}
		return fmt.Appendf(nil, `{"op":"upsert","table":%q,"row":%s}`, c.table, img(ch.after))
	case DebeziumSchema:
		return fmt.Appendf(nil, `{"schema":%s,"payload":{"before":%s,"after":%s,"source":{"connector":"postgresql","db":"shop","table":"orders"},"op":%q,"ts_ms":1764400000000}}`,
			debeziumOrdersSchema, img(ch.before), img(ch.after), ch.op)
	}
	return fmt.Appendf(nil, `{"before":%s,"after":%s,"source":{"connector":"postgresql","db":"shop","table":"orders","lsn":%d},"op":%q,"ts_ms":1764400000000,"transaction":null}`,
		img(ch.before), img(ch.after), c.r.IntN(1<<30), ch.op)
}

// image writes a row image: every column of OrdersSchema, timestamps and
// decimals in the form's encoding.
func (c *CDC) image(row []any, form EventForm) string {
	var b strings.Builder
	b.WriteString(`{"id":`)
	b.WriteString(strconv.FormatInt(row[0].(int64), 10))
	b.WriteString(`,"customer_id":`)
	b.WriteString(jsonValue(row[1]))
	b.WriteString(`,"name":`)
	b.WriteString(jsonValue(row[2]))
	b.WriteString(`,"score":`)
	b.WriteString(DebeziumDouble(row[3]))
	b.WriteString(`,"ts":`)
	ts := row[4].(int64)
	switch form {
	case Debezium:
		b.WriteString(strconv.FormatInt(ts, 10))
	default: // ZonedTimestamp, in a zone of its own
		zone := time.FixedZone("", 2*3600)
		b.WriteString(strconv.Quote(time.UnixMicro(ts).In(zone).Format(time.RFC3339Nano)))
	}
	b.WriteString(`,"amount":`)
	amount := row[5].(decimal128.Num)
	if form == Native {
		b.WriteString(strconv.Quote(amount.ToString(2)))
	} else {
		b.WriteString(strconv.Quote(DebeziumDecimal(amount)))
	}
	b.WriteString("}")
	return b.String()
}

func jsonValue(v any) string {
	out, _ := json.Marshal(v) // nil, int64 and string always encode
	return string(out)
}

// DebeziumDouble writes a double as Debezium's JSON converter does: NaN and
// the infinities as strings.
func DebeziumDouble(v any) string {
	if v == nil {
		return "null"
	}
	f := v.(float64)
	switch {
	case math.IsNaN(f):
		return `"NaN"`
	case math.IsInf(f, 1):
		return `"Infinity"`
	case math.IsInf(f, -1):
		return `"-Infinity"`
	case f == 0 && math.Signbit(f):
		return "-0.0"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// DebeziumDecimal writes a decimal's unscaled value as Debezium's precise
// mode does: base64 of its shortest big-endian two's complement bytes.
func DebeziumDecimal(n decimal128.Num) string {
	v := n.BigInt()
	var b []byte
	if v.Sign() >= 0 {
		b = v.Bytes()
		if len(b) == 0 || b[0]&0x80 != 0 {
			b = append([]byte{0}, b...)
		}
	} else {
		// Two's complement of a negative value: 2^(8k) + v in k bytes.
		k := (v.BitLen() + 8) / 8
		m := new(big.Int).Lsh(big.NewInt(1), uint(8*k))
		b = m.Add(m, v).Bytes()
		for len(b) < k {
			b = append([]byte{0xFF}, b...)
		}
	}
	return base64.StdEncoding.EncodeToString(b)
}

// debeziumOrdersSchema is the envelope schema Debezium writes for an orders
// row of PostgreSQL (bigint, text, double precision, timestamptz,
// numeric(10,2)).
const debeziumOrdersSchema = `{"type":"struct","fields":[` +
	`{"type":"struct","fields":` + ordersRowSchema + `,"optional":true,"name":"shop.public.orders.Value","field":"before"},` +
	`{"type":"struct","fields":` + ordersRowSchema + `,"optional":true,"name":"shop.public.orders.Value","field":"after"},` +
	`{"type":"struct","fields":[{"type":"string","optional":false,"field":"connector"},{"type":"string","optional":false,"field":"db"},` +
	`{"type":"string","optional":false,"field":"table"}],"optional":false,"name":"io.debezium.connector.postgresql.Source","field":"source"},` +
	`{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"}],` +
	`"optional":false,"name":"shop.public.orders.Envelope","version":1}`

const ordersRowSchema = `[{"type":"int64","optional":false,"field":"id"},` +
	`{"type":"int64","optional":true,"field":"customer_id"},` +
	`{"type":"string","optional":true,"field":"name"},` +
	`{"type":"double","optional":true,"field":"score"},` +
	`{"type":"string","optional":true,"name":"io.debezium.time.ZonedTimestamp","version":1,"field":"ts"},` +
	`{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"10"},"field":"amount"}]`
