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

func TestCheck(t *testing.T) {
	isAB := func(x any) bool {
		switch x.(type) {
		case a, b:
			return true
		}
		return false
	}
	if err := Check([]any{onlyA("1"), both{}}, isAB, "A, B"); err != nil {
		t.Fatalf("Check of hooks that implement A or B = %v", err)
	}
	if err := Check([]any(nil), isAB, "A, B"); err != nil {
		t.Fatalf("Check of no hooks = %v", err)
	}
	for _, tt := range []struct {
		hs   []any
		want string
	}{
		{[]any{onlyA("1"), "not a hook"}, "hook 1 of Options.Hooks (string) implements none of A, B"},
		{[]any{nil}, "hook 0 of Options.Hooks is nil"},
	} {
		if err := Check(tt.hs, isAB, "A, B"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Check(%v) = %v, want an error containing %q", tt.hs, err, tt.want)
		}
	}
}
