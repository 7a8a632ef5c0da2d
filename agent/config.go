// Package agent is the machine-side agent: it checks in with its region (or rack proxy), long-polls
// for jobs, runs their scripts, streams their output and follows the redirect a migrated machine
// gets by rewriting its endpoint config.
package agent

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"sigs.k8s.io/yaml"

	"github.com/ironflow/ironflow/internal/atomicfile"
)

// Config defaults, and the longest long poll the agent API serves.
const (
	DefaultPollWait   = 30 * time.Second
	DefaultJobTimeout = time.Hour
	MaxPollWait       = 60 * time.Second
)

// Config is the agent's endpoint config file.
type Config struct {
	Endpoints  []string      // region or rack proxy URLs, tried in order
	Machine    string        // machine UUID
	Secret     string        // Machine.Secret; moves with the machine when it migrates
	PollWait   time.Duration // long-poll wait for next-job
	JobTimeout time.Duration // used when a job carries no timeout of its own
}

// configFile is the on-disk form: durations as Go duration strings ("30s").
type configFile struct {
	Endpoints  []string `json:"endpoints"`
	Machine    string   `json:"machine"`
	Secret     string   `json:"secret"`
	PollWait   string   `json:"pollWait,omitempty"`
	JobTimeout string   `json:"jobTimeout,omitempty"`
}

// ParseConfig decodes and validates a config file's content; unknown keys are refused so a
// typo does not silently fall back to a default.
func ParseConfig(data []byte) (Config, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return Config{}, errors.New("empty config")
	}
	var f configFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return Config{}, fmt.Errorf("not a valid agent config: %w", err)
	}
	cfg := Config{
		Endpoints:  f.Endpoints,
		Machine:    f.Machine,
		Secret:     f.Secret,
		PollWait:   DefaultPollWait,
		JobTimeout: DefaultJobTimeout,
	}
	var err error
	if f.PollWait != "" {
		if cfg.PollWait, err = time.ParseDuration(f.PollWait); err != nil {
			return Config{}, fmt.Errorf("pollWait: %w", err)
		}
	}
	if f.JobTimeout != "" {
		if cfg.JobTimeout, err = time.ParseDuration(f.JobTimeout); err != nil {
			return Config{}, fmt.Errorf("jobTimeout: %w", err)
		}
	}
	cfg.Endpoints = make([]string, len(f.Endpoints))
	for i, ep := range f.Endpoints {
		cfg.Endpoints[i] = strings.TrimRight(ep, "/")
	}
	return cfg, cfg.Validate()
}

// Validate reports the first problem that would keep the agent from working.
func (c Config) Validate() error {
	if len(c.Endpoints) == 0 {
		return errors.New("endpoints: at least one endpoint URL is required")
	}
	for _, ep := range c.Endpoints {
		if err := ValidateEndpoint(ep); err != nil {
			return fmt.Errorf("endpoints: %w", err)
		}
	}
	if _, err := uuid.Parse(c.Machine); err != nil {
		return fmt.Errorf("machine %q: not a UUID: %w", c.Machine, err)
	}
	if c.Secret == "" {
		return errors.New("secret: required")
	}
	if c.PollWait <= 0 || c.PollWait > MaxPollWait {
		return fmt.Errorf("pollWait %s: must be in (0, %s]", c.PollWait, MaxPollWait)
	}
	if c.JobTimeout <= 0 {
		return fmt.Errorf("jobTimeout %s: must be positive", c.JobTimeout)
	}
	return nil
}

// ValidateEndpoint accepts absolute http(s) URLs without query or fragment.
func ValidateEndpoint(ep string) error {
	u, err := url.Parse(ep)
	if err != nil {
		return fmt.Errorf("%q: %w", ep, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q: not an absolute http(s) URL", ep)
	}
	return nil
}

// WithEndpoint returns the config pointed at endpoint alone: a migrated machine must not fall
// back to the region it left.
func (c Config) WithEndpoint(endpoint string) Config {
	c.Endpoints = []string{strings.TrimRight(endpoint, "/")}
	return c
}

// Marshal encodes a valid config in the file format.
func (c Config) Marshal() ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return yaml.Marshal(configFile{
		Endpoints:  c.Endpoints,
		Machine:    c.Machine,
		Secret:     c.Secret,
		PollWait:   c.PollWait.String(),
		JobTimeout: c.JobTimeout.String(),
	})
}

// LoadConfig reads and validates the config file at path.
func LoadConfig(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("agent config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("agent config %s: %w", path, err)
	}
	return cfg, nil
}

// WriteConfig replaces the config file atomically: a crash leaves either the old or the new
// file, never a torn one (temp file in the same directory, fsync, rename, directory fsync).
func WriteConfig(path string, cfg Config) error {
	data, err := cfg.Marshal()
	if err != nil {
		return fmt.Errorf("agent config %s: %w", path, err)
	}
	// The file holds the machine secret: atomicfile writes it 0600.
	if err := atomicfile.Write(path, data); err != nil {
		return fmt.Errorf("agent config: %w", err)
	}
	return nil
}
