package dev

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ironflow/ironflow/internal/atomicfile"
)

// StackFileName is the file in a running stack's state dir that says where its services
// listen: the racks' ports are chosen at every start, so the commands an operator pastes
// read them from here (`ironflow dev env`). It holds no token.
const StackFileName = "stack.json"

// StackAddresses is what the stack file records.
type StackAddresses struct {
	Regions     map[string]string // region name -> API URL
	Temporal    string            // frontend host:port
	TemporalUI  string
	CodecURL    string
	PayloadKeys string // the key file's path
	Racks       map[string]Rack
}

// WriteStackFile records the running stack's addresses in its state dir.
func (s *Stack) WriteStackFile() error {
	a := StackAddresses{Regions: map[string]string{}, Racks: map[string]Rack{}, PayloadKeys: s.PayloadKeys, CodecURL: s.CodecURL}
	if s.Temporal != nil {
		a.Temporal, a.TemporalUI = s.Temporal.Address, s.Temporal.UIURL
	}
	for name, r := range s.Regions {
		a.Regions[name] = r.URL
	}
	for name, rk := range s.Racks {
		a.Racks[name] = *rk
	}
	data, err := json.MarshalIndent(a, "", "  ")
	if err != nil {
		return fmt.Errorf("stack file: %w", err)
	}
	return atomicfile.Write(filepath.Join(s.StateDir, StackFileName), data)
}

// ErrNoStackFile is returned by ReadStackFile for a state dir whose stack has not recorded
// its addresses since it took the state dir's lock: none started there, or it is starting.
var ErrNoStackFile = errors.New("no dev stack has recorded its addresses in this state dir since it started")

// ReadStackFile reads what the stack that last took stateDir's lock recorded; a file older than
// the lock is a previous stack's, whose racks listened on other ports.
func ReadStackFile(stateDir string) (StackAddresses, error) {
	var a StackAddresses
	path := filepath.Join(stateDir, StackFileName)
	file, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return a, fmt.Errorf("%s: %w", stateDir, ErrNoStackFile)
	}
	if err != nil {
		return a, fmt.Errorf("stack file: %w", err)
	}
	if lock, err := os.Stat(filepath.Join(stateDir, lockFileName)); err == nil && file.ModTime().Before(lock.ModTime()) {
		return a, fmt.Errorf("%s: %w (it is still starting)", stateDir, ErrNoStackFile)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return a, fmt.Errorf("stack file: %w", err)
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return a, fmt.Errorf("stack file %s: %w", filepath.Join(stateDir, StackFileName), err)
	}
	return a, nil
}
