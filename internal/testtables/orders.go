package testtables

import (
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
)

// OrdersSchema is the schema of the orders fixture tables: a key, a
// nullable customer, text, a double with every special value, a
// timestamptz and a decimal. The synthetic table of measurements and the
// demo is another one, workload.Schema.
var OrdersSchema = iceberg.NewSchema(0,
	iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true},
	iceberg.NestedField{ID: 2, Name: "customer_id", Type: iceberg.PrimitiveTypes.Int64},
	iceberg.NestedField{ID: 3, Name: "name", Type: iceberg.PrimitiveTypes.String},
	iceberg.NestedField{ID: 4, Name: "score", Type: iceberg.PrimitiveTypes.Float64},
	iceberg.NestedField{ID: 5, Name: "ts", Type: iceberg.PrimitiveTypes.TimestampTz},
	iceberg.NestedField{ID: 6, Name: "amount", Type: iceberg.DecimalTypeOf(10, 2)},
)

var orderNames = []string{"ada", "grace", "alan", "al", "barbara", "edsger", "łukasz"}

// OrdersDay0 is the timestamp of order 0; order i is i*7 hours later, so
// every 24th falls on midnight.
var OrdersDay0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// OrderRow makes order i in version variant, in OrdersSchema order: nulls,
// NaN of both signs, both zeros, infinities and empty strings sprinkled in.
func OrderRow(i, variant int) []any {
	var customer, name, score any = int64(i % 7), orderNames[(i+variant)%len(orderNames)], float64(i)/3 - 5
	if i%11 == 0 {
		customer = nil
	}
	switch {
	case i%13 == 0:
		name = nil
	case i%17 == 0:
		name = ""
	}
	switch i % 10 {
	case 0:
		score = math.NaN()
	case 1:
		score = math.Copysign(0, -1)
	case 2:
		score = 0.0
	case 3:
		score = nil
	case 4:
		score = math.Copysign(math.NaN(), -1)
	case 5:
		score = math.Inf(1 - 2*(i/10%2))
	}
	ts := OrdersDay0.Add(time.Duration(i*7+variant) * time.Hour).UnixMicro()
	return []any{int64(i), customer, name, score, ts, decimal128.FromI64(int64(i*123 + variant))}
}

// OrderRows makes orders [from, to) in version variant.
func OrderRows(from, to, variant int) [][]any {
	var out [][]any
	for i := from; i < to; i++ {
		out = append(out, OrderRow(i, variant))
	}
	return out
}
