package main

import (
	"flag"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
)

// The environment of Microsoft's Service Bus emulator, from the docker-compose templates
// of Azure/azure-service-bus-emulator-installer, and this emulator's own variables.

// defaultConfigPath is where Microsoft's compose templates mount Config.json into its
// emulator's container; it is read when it exists and no -config is given. A variable
// so that tests can point it elsewhere.
var defaultConfigPath = "/ServiceBus_Emulator/ConfigFiles/Config.json"

// defaultHTTPPort is the port of the plain-HTTP administration API and health check of
// Microsoft's emulator (EMULATOR_HTTP_PORT's default in its compose templates).
const defaultHTTPPort = "5300"

// envPrefix starts the variable of each flag: SBEMULATOR_ADDR for -addr,
// SBEMULATOR_HTTP_ADDR for -http-addr.
const envPrefix = "SBEMULATOR_"

// httpPortVar is the variable of Microsoft's emulator that sets the port of its HTTP API;
// it sets -http-addr's default port here.
const httpPortVar = "EMULATOR_HTTP_PORT"

// ignoredVars are the variables of Microsoft's compose templates that configure what
// this emulator does not have (an end-user licence to accept, an SQL Edge database and
// how long to wait for it): accepted and ignored, so that its compose file's environment
// needs no change. CONFIG_PATH is the host's path of the file the templates mount at
// defaultConfigPath; it is not read inside the container.
var ignoredVars = []string{"ACCEPT_EULA", "SQL_SERVER", "MSSQL_SA_PASSWORD", "SQL_WAIT_INTERVAL"}

// envName is the variable of the flag name: SBEMULATOR_ and the name in upper case with
// - as _.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets every flag that the command line did not set from its variable
// (envName), when that variable is set; -version has none. Names of one flag (-cert and
// -admin-cert, which write the same variable) count as one: a name given on the command
// line keeps the variables of the others out, and of their variables the first in
// alphabetical order is applied. A repeatable flag takes one value from its variable,
// comma-separated where the flag allows it.
func applyEnv(fs *flag.FlagSet, lookupEnv func(string) (string, bool)) error {
	given := map[any]bool{}
	fs.Visit(func(f *flag.Flag) { given[flagTarget(f)] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || given[flagTarget(f)] || f.Name == "version" {
			return
		}
		name := envName(f.Name)
		if v, ok := lookupEnv(name); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("sbemulator: %s=%q: %w", name, v, e)
			}
			given[flagTarget(f)] = true
		}
	})
	return err
}

// flagTarget identifies what f sets: the variable its Value points to, which the names
// of one flag share, or f itself.
func flagTarget(f *flag.Flag) any {
	v := reflect.ValueOf(f.Value)
	if v.Kind() == reflect.Pointer {
		return [2]any{v.Type().Elem(), v.Pointer()}
	}
	return f
}

// resolveHTTPAddr returns the address of the plain-HTTP administration API: "" for
// "off", httpAddr when set, else -addr's host with the port of EMULATOR_HTTP_PORT or
// 5300, or a free port when -addr's port is 0 (several emulators side by side, as
// tests start them).
func resolveHTTPAddr(httpAddr, addr string, lookupEnv func(string) (string, bool)) (string, error) {
	switch {
	case strings.EqualFold(httpAddr, "off"):
		return "", nil
	case httpAddr != "":
		return httpAddr, nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("sbemulator: -addr %q: %w", addr, err)
	}
	httpPort := defaultHTTPPort
	if v, ok := lookupEnv(httpPortVar); ok && v != "" {
		if n, err := strconv.ParseUint(v, 10, 16); err != nil || n == 0 {
			return "", fmt.Errorf("sbemulator: %s=%q is not a port number", httpPortVar, v)
		}
		httpPort = v
	}
	if port == "0" {
		httpPort = "0"
	}
	return net.JoinHostPort(host, httpPort), nil
}

// usage prints the help: what the command is, its flags, and its environment.
func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintf(w, `Usage: sbemulator [flags]

An Azure Service Bus emulator for tests in any language: AMQP on -addr (the SDKs'
UseDevelopmentEmulator=true), the administration API over TLS on the same port and over
plain HTTP with GET /health on -http-addr, as Microsoft's Service Bus emulator serves
them. The connection string is the first line of standard output; SIGINT or SIGTERM
stops it (run the built binary in scripts: go run does not pass SIGTERM on).

Flags:
`)
	fs.PrintDefaults()
	fmt.Fprintf(w, `
Environment:
  SBEMULATOR_<FLAG>   sets a flag the command line does not set; FLAG is the flag's
                      name in upper case with - as _: SBEMULATOR_ADDR,
                      SBEMULATOR_HTTP_ADDR, SBEMULATOR_ADVERTISE, SBEMULATOR_CONFIG,
                      SBEMULATOR_QUEUE, SBEMULATOR_V=true... (-version has none). A
                      repeatable flag takes one value, comma-separated where it allows.
  %s  the port of -http-addr when that is not set (Microsoft's
                      emulator's variable).
  %s
                      accepted and ignored: Microsoft's emulator needs them for its
                      licence prompt and its SQL Edge database; this one has neither.
  CONFIG_PATH         not read: Microsoft's compose templates (and sbkit's) mount that
                      host file at %s, which
                      is read when it exists and no -config is given.
`, httpPortVar, strings.Join(ignoredVars, ", "), defaultConfigPath)
}
