package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// daemonFlagEnvs are the variables of every daemon flag as operators set them, in the order
// they are read; "formerly" names a deprecated variable still read. A flag added to a daemon
// without a variable, or a variable renamed, fails TestDaemonFlagsHaveTheirVariables.
var daemonFlagEnvs = map[string]map[string]string{
	"region serve": {
		"endpoint": "IRONFLOW_ENDPOINT", "token": "IRONFLOW_TOKEN",
		"log-level": "IRONFLOW_LOG_LEVEL", "log-format": "IRONFLOW_LOG_FORMAT",
		"database-url": "IRONFLOW_DATABASE_URL", "listen": "IRONFLOW_LISTEN", "name": "IRONFLOW_REGION_NAME",
		"public-url": "IRONFLOW_PUBLIC_URL", "read-timeout": "IRONFLOW_READ_TIMEOUT", "write-timeout": "IRONFLOW_WRITE_TIMEOUT",
		"idle-timeout": "IRONFLOW_IDLE_TIMEOUT", "max-header-bytes": "IRONFLOW_MAX_HEADER_BYTES", "max-conns": "IRONFLOW_MAX_CONNS",
		"events-max-age": "IRONFLOW_EVENTS_MAX_AGE", "events-max-count": "IRONFLOW_EVENTS_MAX_COUNT",
		"syslog-max-age": "IRONFLOW_SYSLOG_MAX_AGE", "syslog-max-count": "IRONFLOW_SYSLOG_MAX_COUNT",
		"admin-token": "IRONFLOW_ADMIN_TOKEN", "rack-secret": "IRONFLOW_RACK_SECRET",
		"dns-listen": "IRONFLOW_DNS_LISTEN", "temporal-address": "IRONFLOW_TEMPORAL_ADDRESS TEMPORAL_ADDRESS", "namespace": "IRONFLOW_TEMPORAL_NAMESPACE TEMPORAL_NAMESPACE",
		"temporal-tls": "IRONFLOW_TEMPORAL_TLS TEMPORAL_TLS", "temporal-api-key": "IRONFLOW_TEMPORAL_API_KEY TEMPORAL_API_KEY",
		"payload-keys": "IRONFLOW_PAYLOAD_KEYS", "ui": "IRONFLOW_UI", "ui-transfers": "IRONFLOW_UI_TRANSFERS", "temporal-ui": "IRONFLOW_TEMPORAL_UI", "images-dir": "IRONFLOW_IMAGES_DIR", "images-max-size": "IRONFLOW_IMAGES_MAX_SIZE", "dns-transfer-from": "IRONFLOW_DNS_TRANSFER_FROM",
	},
	"rack register": {
		"endpoint": "IRONFLOW_ENDPOINT", "token": "IRONFLOW_TOKEN",
		"url": "IRONFLOW_RACK_URL formerly IRONFLOW_RACK_URLS", "secret": "IRONFLOW_RACK_SECRET",
		"name": "IRONFLOW_RACK_NAME", "state-dir": "IRONFLOW_RACK_STATE_DIR",
	},
	"rack serve": {
		"endpoint": "IRONFLOW_ENDPOINT", "token": "IRONFLOW_TOKEN",
		"log-level": "IRONFLOW_LOG_LEVEL", "log-format": "IRONFLOW_LOG_FORMAT",
		"temporal-address": "IRONFLOW_TEMPORAL_ADDRESS TEMPORAL_ADDRESS", "namespace": "IRONFLOW_TEMPORAL_NAMESPACE TEMPORAL_NAMESPACE",
		"temporal-tls": "IRONFLOW_TEMPORAL_TLS TEMPORAL_TLS", "temporal-api-key": "IRONFLOW_TEMPORAL_API_KEY TEMPORAL_API_KEY",
		"payload-keys": "IRONFLOW_PAYLOAD_KEYS",
		"state-dir":    "IRONFLOW_RACK_STATE_DIR", "dhcp-interface": "IRONFLOW_RACK_DHCP_INTERFACE formerly IRONFLOW_DHCP_INTERFACES",
		"router-advertisements": "IRONFLOW_RACK_ROUTER_ADVERTISEMENTS formerly IRONFLOW_ROUTER_ADVERTISEMENTS",
		"dhcp-relay-listen":     "IRONFLOW_RACK_DHCP_RELAY_LISTEN formerly IRONFLOW_DHCP_RELAY_LISTEN",
		"server-ip":             "IRONFLOW_RACK_SERVER_IP", "tftp-listen": "IRONFLOW_RACK_TFTP_LISTEN formerly IRONFLOW_TFTP_LISTEN",
		"dns-listen": "IRONFLOW_RACK_DNS_LISTEN", "proxy-listen": "IRONFLOW_RACK_PROXY_LISTEN", "image-cache-dir": "IRONFLOW_RACK_IMAGE_CACHE_DIR", "image-cache-size": "IRONFLOW_RACK_IMAGE_CACHE_SIZE", "http-listen": "IRONFLOW_RACK_HTTP_LISTEN formerly IRONFLOW_HTTP_LISTEN",
		"syslog-listen":       "IRONFLOW_RACK_SYSLOG_LISTEN formerly IRONFLOW_SYSLOG_LISTEN",
		"http-boot-url":       "IRONFLOW_RACK_HTTP_BOOT_URL formerly IRONFLOW_HTTP_BOOT_URL",
		"boot-dir":            "IRONFLOW_RACK_BOOT_DIR formerly IRONFLOW_BOOT_DIR",
		"region-secrets-file": "IRONFLOW_RACK_REGION_SECRETS_FILE", "pod-ssh-key": "IRONFLOW_RACK_POD_SSH_KEY",
		"pod-refresh-interval": "IRONFLOW_RACK_POD_REFRESH_INTERVAL",
	},
	"worker": {
		"endpoint": "IRONFLOW_ENDPOINT", "token": "IRONFLOW_TOKEN",
		"log-level": "IRONFLOW_LOG_LEVEL", "log-format": "IRONFLOW_LOG_FORMAT",
		"temporal-address": "IRONFLOW_TEMPORAL_ADDRESS TEMPORAL_ADDRESS", "namespace": "IRONFLOW_TEMPORAL_NAMESPACE TEMPORAL_NAMESPACE",
		"temporal-tls": "IRONFLOW_TEMPORAL_TLS TEMPORAL_TLS", "temporal-api-key": "IRONFLOW_TEMPORAL_API_KEY TEMPORAL_API_KEY",
		"payload-keys": "IRONFLOW_PAYLOAD_KEYS",
		"regions-file": "IRONFLOW_REGIONS_FILE", "esxi-ssh-key": "IRONFLOW_ESXI_SSH_KEY", "esxi-allow-tofu": "IRONFLOW_ESXI_ALLOW_TOFU",
		"esxi-ssh-port": "IRONFLOW_ESXI_SSH_PORT", "esxi-user": "IRONFLOW_ESXI_USER",
		"build-id": "IRONFLOW_BUILD_ID", "make-current": "IRONFLOW_MAKE_CURRENT",
	},
	"agent": {
		"endpoint": "IRONFLOW_ENDPOINT", "token": "IRONFLOW_TOKEN",
		"log-level": "IRONFLOW_LOG_LEVEL", "log-format": "IRONFLOW_LOG_FORMAT", "config": "IRONFLOW_AGENT_CONFIG",
	},
	"agent enlist": {
		"endpoint": "IRONFLOW_ENDPOINT", "token": "IRONFLOW_TOKEN",
		"log-level": "IRONFLOW_LOG_LEVEL", "log-format": "IRONFLOW_LOG_FORMAT", "url": "IRONFLOW_ENLIST_URL",
	},
	"codec serve": {
		"endpoint": "IRONFLOW_ENDPOINT", "token": "IRONFLOW_TOKEN",
		"log-level": "IRONFLOW_LOG_LEVEL", "log-format": "IRONFLOW_LOG_FORMAT",
		"payload-keys": "IRONFLOW_PAYLOAD_KEYS", "listen": "IRONFLOW_CODEC_LISTEN", "cors-origin": "IRONFLOW_CODEC_CORS_ORIGIN",
	},
	"dev": {
		"endpoint": "IRONFLOW_ENDPOINT", "token": "IRONFLOW_TOKEN",
		"log-level": "IRONFLOW_LOG_LEVEL", "log-format": "IRONFLOW_LOG_FORMAT",
		"state-dir": "IRONFLOW_DEV_STATE_DIR", "free-ports": "IRONFLOW_DEV_FREE_PORTS", "discovery-image": "IRONFLOW_DEV_DISCOVERY_IMAGE",
	},
}

// flagsWithoutVariables are the daemons' flags that configure nothing a deployment keeps.
var flagsWithoutVariables = map[string]string{
	"help":     "cobra's",
	"output":   "the rendering of a command's answer",
	"fresh":    "what one dev run does",
	"teardown": "what one dev run does",
	"demo":     "what one dev run does",
}

// daemonCommand is the command at path of a fresh command tree, with its inherited flags.
func daemonCommand(t *testing.T, path string) *cobra.Command {
	t.Helper()
	c, _, err := newRootCommand().Find(strings.Fields(path))
	if err != nil || c.CommandPath() != "ironflow "+path {
		t.Fatalf("no command %q: %v", path, err)
	}
	c.InheritedFlags() // merges the parents' persistent flags into c.Flags()
	return c
}

// declaredEnvs is a flag's variables as daemonFlagEnvs writes them.
func declaredEnvs(f *pflag.Flag) string {
	s := strings.Join(f.Annotations[annotationEnv], " ")
	if former := f.Annotations[annotationFormerEnv]; former != nil {
		s += " formerly " + strings.Join(former, " ")
	}
	return s
}

func TestDaemonFlagsHaveTheirVariables(t *testing.T) {
	for path, want := range daemonFlagEnvs {
		c := daemonCommand(t, path)
		seen := map[string]bool{}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if _, none := flagsWithoutVariables[f.Name]; none || f.Hidden {
				return
			}
			seen[f.Name] = true
			envs, ok := want[f.Name]
			switch {
			case !ok:
				t.Errorf("%s --%s: not in daemonFlagEnvs (variables %q)", path, f.Name, declaredEnvs(f))
			case declaredEnvs(f) != envs:
				t.Errorf("%s --%s: variables %q, want %q", path, f.Name, declaredEnvs(f), envs)
			}
			if first := f.Annotations[annotationEnv]; first == nil || !strings.Contains(f.Usage, "(env "+strings.Join(first, ", ")) {
				t.Errorf("%s --%s: usage %q does not name its variables", path, f.Name, f.Usage)
			}
		})
		for name := range want {
			if !seen[name] {
				t.Errorf("%s: no flag --%s", path, name)
			}
		}
	}
}

// A value each kind of flag accepts, another, and one it refuses.
func sampleValues(f *pflag.Flag) (env, flag, bad string) {
	switch f.Value.Type() {
	case "bool":
		if f.DefValue == "true" {
			return "false", "true", "maybe"
		}
		return "true", "false", "maybe"
	case "int", "int64":
		return "7", "8", "many"
	case "duration":
		return "7s", "8s", "soon"
	case "stringArray":
		return "a, b", "c", ""
	}
	return "from-env", "from-flag", ""
}

// TestDaemonFlagPrecedence: for every daemon flag, its first variable, then the next, then a
// former name (with a warning) stand in for the flag, the command line wins over all of
// them, and a value the flag refuses is an error naming the variable.
func TestDaemonFlagPrecedence(t *testing.T) {
	for path := range daemonFlagEnvs {
		daemonCommand(t, path).Flags().VisitAll(func(f *pflag.Flag) {
			envs := append(f.Annotations[annotationEnv], f.Annotations[annotationFormerEnv]...)
			if envs == nil {
				return
			}
			t.Run(path+"/"+f.Name, func(t *testing.T) {
				envValue, flagValue, bad := sampleValues(f)
				wantEnv := envValue
				if f.Value.Type() == "stringArray" {
					wantEnv = "[a,b]"
				}
				for _, env := range envs {
					c := daemonCommand(t, path)
					unsetFlagEnv(t, c)
					t.Setenv(env, envValue)
					var warnings bytes.Buffer
					c.SetErr(&warnings)
					if err := parseWithEnv(c, nil); err != nil {
						t.Fatalf("%s=%s: %v", env, envValue, err)
					}
					if got := c.Flags().Lookup(f.Name).Value.String(); got != wantEnv {
						t.Errorf("%s=%s: --%s is %q, want %q", env, envValue, f.Name, got, wantEnv)
					}
					former := slices.Contains(f.Annotations[annotationFormerEnv], env)
					if warned := strings.Contains(warnings.String(), env+" is deprecated: set "+envs[0]); warned != former {
						t.Errorf("%s: warnings %q", env, warnings.String())
					}

					c = daemonCommand(t, path)
					if err := parseWithEnv(c, []string{"--" + f.Name + "=" + flagValue}); err != nil {
						t.Fatal(err)
					}
					wantFlag := flagValue
					if f.Value.Type() == "stringArray" {
						wantFlag = "[" + flagValue + "]"
					}
					if got := c.Flags().Lookup(f.Name).Value.String(); got != wantFlag {
						t.Errorf("--%s=%s with %s set: %q, want the flag's", f.Name, flagValue, env, got)
					}
				}
				if len(envs) > 1 {
					c := daemonCommand(t, path)
					for _, env := range envs[1:] {
						t.Setenv(env, flagValue)
					}
					t.Setenv(envs[0], envValue)
					if err := parseWithEnv(c, nil); err != nil {
						t.Fatal(err)
					}
					if got := c.Flags().Lookup(f.Name).Value.String(); got != wantEnv {
						t.Errorf("all of %v set: --%s is %q, want %s's %q", envs, f.Name, got, envs[0], wantEnv)
					}
				}
				if bad == "" {
					return
				}
				c := daemonCommand(t, path)
				unsetFlagEnv(t, c)
				t.Setenv(envs[0], bad)
				err := parseWithEnv(c, nil)
				if want := envs[0] + "=\"" + bad + "\": invalid value for --" + f.Name; err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v, want one starting %q", err, want)
				}
			})
		})
	}
}
