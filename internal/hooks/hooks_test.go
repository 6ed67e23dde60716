package hooks

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
)

type a interface{ A() string }
type b interface{ B() }

type onlyA string

func (x onlyA) A() string { return string(x) }

type both struct{ onlyA }

func (both) B() {}

func TestSelectAndCall(t *testing.T) {
	hs := []any{onlyA("1"), "not a hook", both{onlyA("2")}, nil}
	as := Select[a](hs)
	if len(as) != 2 || as[0].A() != "1" || as[1].A() != "2" {
		t.Fatalf("Select[a] = %v", as)
	}
	if bs := Select[b](hs); len(bs) != 1 {
		t.Fatalf("Select[b] = %v, want the one that implements B", bs)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var got []string
	Call(context.Background(), log, "pkg", "AHook", as, func(h a) {
		if h.A() == "1" {
			panic("boom")
		}
		got = append(got, h.A())
	})
	if len(got) != 1 || got[0] != "2" {
		t.Fatalf("hooks after a panicking one: %v, want [2]", got)
	}
	if !strings.Contains(buf.String(), "pkg: recovered panic in AHook") || !strings.Contains(buf.String(), "boom") {
		t.Fatalf("log %q", buf.String())
	}
}
