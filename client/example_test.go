package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/streamidx/streamidx/client"
)

// A lookup through the service of `streamidx run --serve`, asked again
// when the service is busy or restarting. (Compiled, not run: it needs a
// running service.)
func ExampleClient_Lookup() {
	c := client.New("http://127.0.0.1:9464", client.Options{
		Token: os.Getenv("STREAMIDX_SERVE_TOKEN"),
		Retry: client.Retry{Attempts: 2, MaxWait: time.Second},
	})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ans, err := c.Lookup(ctx, "sales.orders", "pk", client.Request{Where: "order_id IN (7, 8)"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("index snapshot %d answered for table snapshot %d (%d commits behind, reconciled)\n",
		ans.Header.IndexSnapshotID, ans.Header.TableSnapshotID, ans.Header.CommitsBehind)
	for _, row := range ans.Rows {
		fmt.Println(string(row)) // {"order_id":7,"_file":"s3://...","_pos":1234}
	}
}
