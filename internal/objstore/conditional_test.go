package objstore

import (
	"fmt"
	"testing"

	"github.com/aws/smithy-go"
)

// TestRefusedConditionalCreate: S3's answer to a conditional create of a key
// that exists is a lost race, also when the request id of the failed
// operation contains "301", which gocloud reads as a missing bucket.
func TestRefusedConditionalCreate(t *testing.T) {
	refused := &smithy.GenericAPIError{Code: "PreconditionFailed", Message: "At least one of the pre-conditions you specified did not hold"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"412 with a request id holding 301", &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject",
			Err: fmt.Errorf("https response error StatusCode: 412, RequestID: 18ECF6C1237D9DE6AF301DAE: %w", refused)}, true},
		{"412", &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject", Err: refused}, true},
		{"missing bucket", &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject",
			Err: &smithy.GenericAPIError{Code: "NoSuchBucket"}}, false},
		{"other", fmt.Errorf("connection reset"), false},
	} {
		if got := refusedConditionalCreate(tc.err); got != tc.want {
			t.Errorf("%s: refused %t, want %t", tc.name, got, tc.want)
		}
	}
}
