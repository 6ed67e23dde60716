package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"

	"github.com/sbkit/sbkit/examples/internal/leaktest"
	"github.com/sbkit/sbkit/examples/internal/sbenv"
)

func TestProducerPublishesEveryOrder(t *testing.T) {
	leaktest.Check(t)
	var out bytes.Buffer
	noEnv := func(string) string { return "" }
	if err := run(t.Context(), []string{"-n", "25"}, &out, noEnv); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	for _, want := range []string{"publishing 25 orders", "25 accepted, 0 failed", `queue "orders" now holds 25 messages`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestProducerBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"zero orders", []string{"-n", "0"}, nil, "must be positive"},
		{"unknown flag", []string{"-x"}, nil, "flag provided but not defined"},
		{"bad connection string", nil, map[string]string{sbenv.ConnectionStringEnv: "garbage"}, sbenv.ConnectionStringEnv},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := run(t.Context(), tc.args, &bytes.Buffer{}, func(k string) string { return tc.env[k] })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestProducerHelp(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"-h"}, &out, func(string) string { return "" }); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"-n", "-ttl", sbenv.ConnectionStringEnv, sbenv.QueueEnv} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}
