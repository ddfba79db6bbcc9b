//go:build itest

package testservers

// Required: an itest build fails a test whose server is not configured.
const Required = true
