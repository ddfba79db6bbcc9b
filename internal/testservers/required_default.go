//go:build !itest

package testservers

// Required: outside an itest build a test leaves out servers that are not
// configured.
const Required = false
