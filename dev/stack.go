package dev

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	temporallog "go.temporal.io/sdk/log"
	"golang.org/x/sync/errgroup"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/dev/postgres"
	"github.com/ironflow/ironflow/dev/temporalserver"
	"github.com/ironflow/ironflow/internal/buildid"
	"github.com/ironflow/ironflow/internal/payloadcodec"
	"github.com/ironflow/ironflow/region/api"
	"github.com/ironflow/ironflow/region/server"
	"github.com/ironflow/ironflow/region/store"
	"github.com/ironflow/ironflow/workers"
)

// RegionNames are the regions of the dev stack, in the roles of the seed's drp1 and drp2.
var RegionNames = []string{"region-a", "region-b"}

// StackOptions configure a dev stack. Zero ports pick free ones (tests); `ironflow dev` uses
// the well-known ports so URLs stay the same across restarts.
type StackOptions struct {
	StateDir string // persistent state; empty = a temp dir removed by Stop
	// Lock is StateDir's lock when the caller took it (to clear the dir first); nil: StartStack
	// takes it. Either way the stack holds it until Stop.
	Lock           *StateLock
	RegionPorts    []int // one per region; nil = free ports
	TemporalPort   int
	TemporalUIPort int // -1 = no web UI
	// TemporalMetricsPort serves the Temporal server's Prometheus metrics: 0 = none, -1 = a free port.
	TemporalMetricsPort int
	Seed                bool
	RunWorker           bool                  // run the migration worker in this process
	ESXi                activities.ESXiConfig // that worker's SSH to ESXi hosts; zero: only hosts with an agent
	NoRacks             bool                  // regions only: no rack controllers
	// RackLinks serves each rack's broadcast DHCP on a link of its own (RackLink), which
	// needs root; without root Rack.DHCPOff says why and the racks serve relayed DHCP only.
	RackLinks          bool
	PodSSHKey          string        // the racks' private key file for qemu+ssh pods (rack serve --pod-ssh-key)
	PodRefreshInterval time.Duration // how often the racks refresh their pods; 0: rack.DefaultPodRefreshInterval
	PowerPollInterval  time.Duration // how often the racks check their machines' power; 0: rack.DefaultPowerPollInterval
	Logger             *slog.Logger
	TemporalLogFile    string
	Version            string // reported by the regions' /api/v1/info
	// DiscoveryImage is a directory with the discovery image (`make image`), copied into each
	// rack's boot dir as discovery/vmlinuz and discovery/initrd.img; "": none.
	DiscoveryImage string

	// StartTemporal starts another Temporal server than the dev server (the Temporal ports
	// above are then its business), on the stack's PostgreSQL and in its state dir. The stack
	// adds the workflows' search attributes to its namespace "default".
	StartTemporal func(ctx context.Context, pg *postgres.Cluster, stateDir string) (*temporalserver.Server, error)
}

// Region is one region controller of the stack.
type Region struct {
	Name  string
	URL   string
	Store *store.Store

	srv     *server.Server
	mu      sync.Mutex
	serving *serving // nil while stopped (StopRegion)
}

// Stack is the whole system on one machine: PostgreSQL, the Temporal dev server, two regions
// with a rack each, and a migration worker. Used by `ironflow dev`, `make demo` and the integration tests.
type Stack struct {
	StateDir   string
	AdminToken string
	Postgres   *postgres.Cluster
	Temporal   *temporalserver.Server
	Regions    map[string]*Region
	Racks      map[string]*Rack
	Client     client.Client // Temporal client
	// PayloadKeys is the key file (in the state dir) every Temporal client of the stack
	// encrypts payloads with; the CLI reads it from IRONFLOW_PAYLOAD_KEYS.
	PayloadKeys string
	// CodecURL is the codec endpoint of the stack (admins of region-a), for the web UI and
	// `temporal --codec-endpoint`.
	CodecURL string
	// DataConverter is the data converter of the stack's clients, for payloads the SDK hands
	// over as stored (histories, memos of descriptions).
	DataConverter converter.DataConverter

	log            *slog.Logger
	version        string
	podSSHKey      string
	discoveryImage string
	podRefresh     time.Duration
	powerPoll      time.Duration
	rackLinks      bool
	tempDir        bool
	lock           *StateLock
	runCtx         context.Context // ends when Stop is called
	cancel         context.CancelFunc
	group          *errgroup.Group
}

// StartStack starts everything and returns when every part answers.
func StartStack(ctx context.Context, opts StackOptions) (_ *Stack, err error) {
	s := &Stack{StateDir: opts.StateDir, Regions: map[string]*Region{}, Racks: map[string]*Rack{}, log: opts.Logger, version: opts.Version, podSSHKey: opts.PodSSHKey, podRefresh: opts.PodRefreshInterval, powerPoll: opts.PowerPollInterval, rackLinks: opts.RackLinks, discoveryImage: opts.DiscoveryImage}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.StateDir == "" {
		if s.StateDir, err = os.MkdirTemp("", "ironflow-dev-"); err != nil {
			return nil, fmt.Errorf("dev state dir: %w", err)
		}
		s.tempDir = true
	}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	// Child processes (PostgreSQL, Temporal) run in other directories: they get absolute paths.
	if s.StateDir, err = filepath.Abs(s.StateDir); err != nil {
		return nil, fmt.Errorf("dev state dir: %w", err)
	}
	if s.lock = opts.Lock; s.lock == nil {
		if s.lock, err = LockStateDir(s.StateDir); err != nil {
			return nil, err
		}
	}
	// What a crashed stack on this state dir left in the kernel goes before anything starts.
	if err := removeRackLinks(s.StateDir); err != nil {
		return nil, err
	}
	if s.AdminToken, err = adminToken(s.StateDir); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.group, runCtx = errgroup.WithContext(runCtx)
	s.runCtx = runCtx

	if s.Postgres, err = postgres.StartInStateDir(ctx, s.StateDir); err != nil {
		return nil, err
	}
	for i, name := range RegionNames {
		port := 0
		if i < len(opts.RegionPorts) {
			port = opts.RegionPorts[i]
		}
		if err := s.startRegion(ctx, runCtx, name, port); err != nil {
			return nil, err
		}
	}
	codec, err := s.listenCodec()
	if err != nil {
		return nil, err
	}
	if opts.StartTemporal != nil {
		s.Temporal, err = opts.StartTemporal(ctx, s.Postgres, s.StateDir)
	} else {
		temporalOpts := temporalserver.Options{Port: opts.TemporalPort, UIPort: opts.TemporalUIPort, DBFile: filepath.Join(s.StateDir, "temporal.db"), LogFile: opts.TemporalLogFile, MetricsPort: opts.TemporalMetricsPort, UICodecEndpoint: s.CodecURL}
		s.Temporal, err = temporalserver.Start(ctx, temporalOpts)
	}
	if err != nil {
		_ = codec.listener.Close()
		return nil, err
	}
	codec.serve(s.Temporal.UIURL)
	if s.Client, err = client.Dial(s.temporalOptions()); err != nil {
		return nil, fmt.Errorf("dial temporal: %w", err)
	}
	if err := workers.RegisterSearchAttributes(ctx, s.Client, "default"); err != nil {
		return nil, err
	}
	if !opts.NoRacks {
		for _, name := range RegionNames {
			if err := s.startRack(ctx, name); err != nil {
				return nil, err
			}
		}
	}
	if opts.Seed {
		if err := s.seed(ctx); err != nil {
			return nil, err
		}
	}
	if opts.RunWorker {
		if err := s.startWorker(ctx, opts.ESXi); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// temporalOptions are the options of every Temporal client of the stack: its payloads
// encrypted with the stack's keys.
func (s *Stack) temporalOptions() client.Options {
	return client.Options{HostPort: s.Temporal.Address, Logger: temporallog.NewStructuredLogger(s.log), DataConverter: s.DataConverter}
}

// stackCodec is the stack's codec endpoint, listening but not yet serving: the web UI's
// origin, which it lets call it, is known once Temporal runs.
type stackCodec struct {
	s        *Stack
	listener net.Listener
	endpoint *payloadcodec.Endpoint
}

// listenCodec creates the stack's payload keys (once, in the state dir) and the listener of
// its codec endpoint, which authenticates callers with region-a.
func (s *Stack) listenCodec() (*stackCodec, error) {
	s.PayloadKeys = filepath.Join(s.StateDir, "payload.keys")
	keys, err := payloadcodec.EnsureFile(s.PayloadKeys)
	if err != nil {
		return nil, err
	}
	s.DataConverter = keys.DataConverter()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("codec endpoint: %w", err)
	}
	s.CodecURL = "http://" + ln.Addr().String()
	e := &payloadcodec.Endpoint{Codec: keys, Region: s.Regions[RegionNames[0]].URL, Logger: s.log.With("component", "codec")}
	return &stackCodec{s: s, listener: ln, endpoint: e}, nil
}

// serve serves the codec endpoint to the web UI at uiURL (none: "") and to the CLI.
func (c *stackCodec) serve(uiURL string) {
	if uiURL != "" {
		c.endpoint.AllowOrigins = []string{uiURL}
	}
	c.s.group.Go(func() error { return c.endpoint.Serve(c.s.runCtx, c.listener) })
}

func (s *Stack) startRegion(ctx, runCtx context.Context, name string, port int) error {
	db := "ironflow_" + strings.ReplaceAll(name, "-", "_")
	if err := s.Postgres.CreateDatabase(ctx, db); err != nil {
		return err
	}
	st, err := store.Open(ctx, s.Postgres.URL(db))
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if _, _, err := st.BootstrapAdmin(ctx, s.AdminToken); err != nil {
		st.Close()
		return fmt.Errorf("%s: %w", name, err)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		st.Close()
		return fmt.Errorf("%s listen: %w", name, err)
	}
	url := "http://" + ln.Addr().String()
	r := &Region{Name: name, URL: url, Store: st}
	// Each region keeps its OS images in the state dir, so `images upload` works on the stack.
	images := filepath.Join(s.StateDir, name, "images")
	r.srv = server.New(st, server.Config{Name: name, PublicURL: url, Version: s.version, ImagesDir: images, Logger: s.log.With("region", name), UI: true})
	s.Regions[name] = r
	s.group.Go(func() error {
		<-runCtx.Done()
		s.StopRegion(name)
		st.Close()
		return nil
	})
	r.serve(runCtx, ln)
	return nil
}

// RegionsConfig is the worker's view of the stack's regions (name -> URL + admin token).
func (s *Stack) RegionsConfig() map[string]activities.RegionConfig {
	out := map[string]activities.RegionConfig{}
	for name, r := range s.Regions {
		out[name] = activities.RegionConfig{URL: r.URL, Token: s.AdminToken}
	}
	return out
}

// WriteRegionsFile writes the regions file an `ironflow worker` process reads.
func (s *Stack) WriteRegionsFile() (string, error) {
	data, err := activities.MarshalRegions(s.RegionsConfig())
	if err != nil {
		return "", err
	}
	path := filepath.Join(s.StateDir, "regions.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("regions file: %w", err)
	}
	return path, nil
}

// startWorker runs the migration worker as the version of this binary's build and makes it
// current, as `ironflow worker --make-current` does: runs a stack of an earlier build left in
// its state dir stay pinned to that build.
func (s *Stack) startWorker(ctx context.Context, esxi activities.ESXiConfig) error {
	regions, err := activities.NewRegions(s.RegionsConfig(), activities.DialClient)
	if err != nil {
		return err
	}
	build, err := buildid.FromBinary()
	if err != nil {
		return err
	}
	w := workers.NewMigrationWorker(s.Client, &activities.Activities{Regions: regions, ESXi: esxi}, workers.Versioned(build))
	if err := w.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	s.group.Go(func() error {
		<-s.runCtx.Done()
		w.Stop()
		return nil
	})
	return workers.MakeCurrent(ctx, s.Client, build)
}

// Stop ends every part of the stack and removes a temporary state dir.
func (s *Stack) Stop() {
	if s.cancel != nil {
		s.cancel()
	}
	if s.group != nil {
		if err := s.group.Wait(); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("dev stack stopped with an error", "error", err)
		}
	}
	if s.Client != nil {
		s.Client.Close()
	}
	if s.Temporal != nil {
		s.Temporal.Stop()
	}
	if s.Postgres != nil {
		_ = s.Postgres.Stop()
	}
	if err := removeRackLinks(s.StateDir); err != nil {
		s.log.Warn("remove the racks' links", "error", err)
	}
	if s.tempDir {
		if err := postgres.RemoveStateDir(s.StateDir); err != nil {
			s.log.Warn("remove the dev state dir", "error", err)
		}
	}
	s.lock.Unlock()
}

// adminToken reads the stack's admin token, minting and saving one on first start.
func adminToken(stateDir string) (string, error) {
	path := filepath.Join(stateDir, "admin-token")
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	token := base64.RawURLEncoding.EncodeToString(raw)
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	return token, nil
}

// WaitRackOnline waits until the rack reports online (it says degraded until its first config
// arrives, and beats every api.RackHeartbeatInterval): a transfer starts from an online rack.
func (s *Stack) WaitRackOnline(ctx context.Context, name string) error {
	rk := s.Racks[name]
	r := s.Regions[rk.Region]
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var rack api.Rack
		if err := r.Store.Get(ctx, api.KindRacks, rk.Uuid, &rack); err == nil && rack.Status == api.RackOnline {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("rack %s not online on %s: %w", name, rk.Region, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
