package sbtest

import (
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/sbkit/sbkit/sbtest/internal/wire"
)

// Every ServerOptions field reaches the wire server under its own name, except those the
// model applies: a field added to both and not copied is a silent change of behaviour.
func TestWireOptionsCopyEveryServerOption(t *testing.T) {
	modelOnly := map[string]bool{"Namespace": true, "NamespaceOptions": true, "Queues": true, "Topics": true, "DisableExplorer": true}
	var o ServerOptions
	ov := reflect.ValueOf(&o).Elem()
	for i := range ov.NumField() {
		setDistinct(t, ov.Type().Field(i).Name, ov.Field(i), i+1)
	}
	wo := reflect.ValueOf(wireOptions(o, nil))
	for i := range ov.NumField() {
		name := ov.Type().Field(i).Name
		w := wo.FieldByName(name)
		switch {
		case modelOnly[name]:
			if w.IsValid() {
				t.Errorf("%s is listed as the model's but wire.Options has it too", name)
			}
		case !w.IsValid():
			t.Errorf("ServerOptions.%s has no field in wire.Options and is not the model's", name)
		case !reflect.DeepEqual(w.Interface(), ov.Field(i).Interface()):
			t.Errorf("wire.Options.%s = %v, want ServerOptions' %v", name, w.Interface(), ov.Field(i).Interface())
		}
	}
}

// setDistinct sets v, the field name, to a value of its type that no other field has.
func setDistinct(t *testing.T, name string, v reflect.Value, n int) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(name)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(n))
	case reflect.Uint32:
		v.SetUint(uint64(n))
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		m.SetMapIndex(reflect.ValueOf(name).Convert(v.Type().Key()), reflect.Zero(v.Type().Elem()))
		v.Set(m)
	case reflect.Pointer:
		switch v.Type() {
		case reflect.TypeFor[*slog.Logger]():
			v.Set(reflect.ValueOf(slog.New(slog.DiscardHandler)))
		default:
			v.Set(reflect.New(v.Type().Elem()))
		}
	default:
		t.Fatalf("ServerOptions.%s: no distinct value for a %s; teach setDistinct", name, v.Type())
	}
}

// sbtest's documented defaults are the ones the wire server applies.
func TestServerDefaultsAreTheWires(t *testing.T) {
	for _, c := range []struct {
		name       string
		sbtest, wi any
	}{
		{"MaxFrameSize", uint32(DefaultServerMaxFrameSize), uint32(wire.DefaultMaxFrameSize)},
		{"MaxConnections", DefaultServerMaxConnections, wire.DefaultMaxConnections},
		{"MaxSessions", DefaultServerMaxSessions, wire.DefaultMaxSessions},
		{"MaxLinks", DefaultServerMaxLinks, wire.DefaultMaxLinks},
		{"WriteTimeout", time.Duration(DefaultServerWriteTimeout), time.Duration(wire.DefaultWriteTimeout)},
		{"MaxHandshakes", DefaultServerMaxHandshakes, wire.DefaultMaxHandshakes},
		{"HandshakeTimeout", time.Duration(DefaultServerHandshakeTimeout), time.Duration(wire.DefaultHandshakeTimeout)},
		{"AdminIdleTimeout", time.Duration(DefaultServerAdminIdleTimeout), time.Duration(wire.DefaultAdminIdleTimeout)},
	} {
		if c.sbtest != c.wi {
			t.Errorf("DefaultServer%s = %v, the wire server's default is %v", c.name, c.sbtest, c.wi)
		}
	}
}
