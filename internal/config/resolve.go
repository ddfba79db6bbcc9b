package config

import (
	"fmt"
	"io"
	"log/slog"
)

// Resolve is the configuration a streamidx command runs with: the file at
// path ("" for none), then the STREAMIDX_* environment, then flags (by
// config key; empty values are flags not given), then the defaults, then
// validated.
func Resolve(path string, flags map[string]string) (Config, error) {
	c, err := Load(path)
	if err != nil {
		return c, err
	}
	for key, v := range flags {
		if v != "" {
			if err := c.Set(key, v); err != nil {
				return c, err
			}
		}
	}
	if err := c.EnsureDefaults(); err != nil {
		return c, err
	}
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("invalid configuration: %w", err)
	}
	return c, nil
}

// Logger is a logger to w at c's level and in c's format.
func (c LogConfig) Logger(w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
