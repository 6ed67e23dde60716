package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
)

// keysConfig is a configuration file that names only shared access keys.
const keysConfig = `{
  // sbkit's own section; Microsoft's emulator has none.
  "Sbkit": {
    "SharedAccessKeys": [
      {"KeyName": "RootManageSharedAccessKey", "Key": "file-key"},
      {"KeyName": "listen", "Key": "other=="}
    ]
  }
}`

// Config.json names keys in its Sbkit section, in a file of its own or beside the
// entities; every mistake is an error that names its line and column.
func TestParseConfigSASKeys(t *testing.T) {
	t.Parallel()
	e := newEntities()
	if err := parseConfig([]byte(keysConfig), e); err != nil {
		t.Fatalf("a file with keys only: %v", err)
	}
	if err := parseConfig([]byte(sampleConfig), e); err != nil {
		t.Fatal(err)
	}
	if len(e.SASKeys) != 2 || e.SASKeys["RootManageSharedAccessKey"] != "file-key" || e.SASKeys["listen"] != "other==" {
		t.Errorf("keys %v, want the file's two", e.SASKeys)
	}
	if len(e.Queues) == 0 {
		t.Error("the second file's queues are missing")
	}
	// A name given twice, in another file too, is refused.
	if err := parseConfig([]byte(keysConfig), e); !errors.Is(err, errConfig) || !strings.Contains(err.Error(), "line 5, column 7: Sbkit.SharedAccessKeys[0]: KeyName \"RootManageSharedAccessKey\" is given twice") {
		t.Errorf("the same key name in a second file: %v", err)
	}

	with := func(keys string) string {
		return "{\"UserConfig\":{\"Namespaces\":[{\"Queues\":[{\"Name\":\"q\"}]}]},\n\"Sbkit\":{\"SharedAccessKeys\":[\n" + keys + "]}}"
	}
	many := make([]string, 13)
	for i := range many {
		many[i] = fmt.Sprintf(`{"KeyName":"k%d","Key":"x"}`, i)
	}
	for _, tt := range []struct{ name, in, want string }{
		{"empty key", with(`{"KeyName":"a","Key":""}`), `line 3, column 1: Sbkit.SharedAccessKeys[0]: Key is empty`},
		{"no name", with(`{"KeyName":"a","Key":"k"},` + "\n" + `{"Key":"k"}`), `line 4, column 1: Sbkit.SharedAccessKeys[1]: KeyName is empty`},
		{"semicolon", with(`{"KeyName":"a","Key":"k;x"}`), `line 3, column 1: Sbkit.SharedAccessKeys[0]: Key holds ';'`},
		{"spaces", with(`{"KeyName":" a","Key":"k"}`), `KeyName " a" has surrounding spaces`},
		{"twice", with(`{"KeyName":"a","Key":"k"},{"KeyName":"a","Key":"j"}`), `line 3, column 27: Sbkit.SharedAccessKeys[1]: KeyName "a" is given twice`},
		{"more than 12", with(strings.Join(many, ",")), `Sbkit.SharedAccessKeys[12]: more than 12 keys`},
		{"wrong type", with(`{"KeyName":"a","Key":5}`), `line 3, column 22: Sbkit.SharedAccessKeys.Key is number, want a string`},
		{"unknown key", with(`{"KeyName":"a","PrimaryKey":"k"}`), `line 3, column 16: Sbkit.SharedAccessKeys[0]: unknown key "PrimaryKey" (known: Key, KeyName)`},
		{"not a list", `{"Sbkit":{"SharedAccessKeys":{"KeyName":"a"}}}`, `Sbkit.SharedAccessKeys is object, want an array`},
		{"empty section", `{"Sbkit":{"SharedAccessKeys":[]}}`, `no UserConfig.Namespaces (nor Sbkit.SharedAccessKeys)`},
	} {
		err := parseConfig([]byte(tt.in), newEntities())
		if !errors.Is(err, errConfig) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want errConfig with %q", tt.name, err, tt.want)
		}
	}
}

// The keys come from one source: the command line, else the environment, else the
// configuration files (a key given to override the file's leaves the file's invalid).
func TestSASKeysPrecedence(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(file, []byte(keysConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	env := envOf(map[string]string{"SBEMULATOR_SAS_KEY": "env=env-key"})
	var stderr bytes.Buffer
	for _, tt := range []struct {
		name string
		args []string
		env  func(string) (string, bool)
		want map[string]string
	}{
		{"file only", []string{"-config", file}, noEnv, map[string]string{"RootManageSharedAccessKey": "file-key", "listen": "other=="}},
		{"environment over file", []string{"-config", file}, env, map[string]string{"env": "env-key"}},
		{"command line over both", []string{"-config", file, "-sas-key", "cli=cli-key"}, env, map[string]string{"cli": "cli-key"}},
		{"file named by the environment", nil, envOf(map[string]string{"SBEMULATOR_CONFIG": file}), map[string]string{"RootManageSharedAccessKey": "file-key", "listen": "other=="}},
		{"none", []string{"-queue", "q"}, noEnv, nil},
	} {
		cfg, err := parseFlags(tt.args, tt.env, &stderr)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if fmt.Sprint(cfg.sasKeys) != fmt.Sprint(tt.want) {
			t.Errorf("%s: keys %v, want %v", tt.name, cfg.sasKeys, tt.want)
		}
	}
}

// The emulator started with keys from Config.json checks tokens as the service does: the
// Go SDK with the printed connection string (the first key by name) sends and receives,
// with a wrong key its send and its receive fail with CodeUnauthorizedAccess.
func TestRunWithConfigSASKeys(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "Config.json")
	cfg := strings.Replace(keysConfig, "{\n  //", "{\"UserConfig\":{\"Namespaces\":[{\"Queues\":[{\"Name\":\"keyed\"}]}]},\n  //", 1)
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startRun(t, "-addr", "127.0.0.1:0", "-http-addr", "off", "-config", file)
	good := srv.ConnectionString()
	if !strings.Contains(good, "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=file-key") {
		t.Fatalf("connection string %q, want the file's first key by name", good)
	}
	opCtx, opCancel := context.WithTimeout(context.Background(), testTimeout)
	defer opCancel()
	client := func(cs string) *azservicebus.Client {
		c, err := azservicebus.NewClientFromConnectionString(cs, &azservicebus.ClientOptions{RetryOptions: azservicebus.RetryOptions{MaxRetries: -1}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return c
	}
	send := func(c *azservicebus.Client) error {
		s, err := c.NewSender("keyed", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(opCtx)
		return s.SendMessage(opCtx, &azservicebus.Message{Body: []byte("keyed")}, nil)
	}
	receive := func(c *azservicebus.Client) ([]*azservicebus.ReceivedMessage, error) {
		r, err := c.NewReceiverForQueue("keyed", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close(opCtx)
		msgs, err := r.ReceiveMessages(opCtx, 1, nil)
		for _, m := range msgs {
			if err := r.CompleteMessage(opCtx, m, nil); err != nil {
				t.Errorf("complete with the right key: %v", err)
			}
		}
		return msgs, err
	}
	right := client(good)
	if err := send(right); err != nil {
		t.Fatalf("send with the right key: %v", err)
	}
	if msgs, err := receive(right); err != nil || len(msgs) != 1 || string(msgs[0].Body) != "keyed" {
		t.Fatalf("receive with the right key: %d messages, %v", len(msgs), err)
	}
	wrong := client(strings.Replace(good, "file-key", "wrong-key", 1))
	var se *azservicebus.Error
	if err := send(wrong); !errors.As(err, &se) || se.Code != azservicebus.CodeUnauthorizedAccess {
		t.Errorf("send with a wrong key: %v, want CodeUnauthorizedAccess", err)
	}
	if _, err := receive(wrong); !errors.As(err, &se) || se.Code != azservicebus.CodeUnauthorizedAccess {
		t.Errorf("receive with a wrong key: %v, want CodeUnauthorizedAccess", err)
	}
	if q, _ := srv.Namespace().Entity("keyed"); q.Counts().Active != 0 {
		t.Errorf("keyed holds %+v, want nothing: the wrong key sent none", q.Counts())
	}
}
