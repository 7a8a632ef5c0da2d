package api

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// Machine power through its BMC (ARCHITECTURE.md "Power"). The operator gives a machine a power
// driver and the BMC's credentials; the machine's rack, which reaches the BMC on its own
// network, runs every power action and polls the power state. The BMC password is a machine
// secret (PowerPasswordSecret): never in the machine's JSON, a workflow payload, a log or an
// audit event.
//
//	PUT /api/v1/machines/{key}/power                              PowerConfig -> Machine (admin, operator)
//	GET /api/v1/racks/{uuid}/machines/{machine}/power-credential  -> PowerCredential (the machine's rack, admin, operator)
//	PUT /api/v1/racks/{uuid}/machines/{machine}/power             PowerReport -> Machine (the machine's rack)

// Power types: which driver the rack uses.
const (
	PowerTypeIPMI   = "ipmi"   // IPMI v2.0 lanplus over UDP
	PowerTypeVirsh  = "virsh"  // a VM of a KVM pod, through the pod's libvirt (set for composed VMs)
	PowerTypeManual = "manual" // no driver: an operator powers the machine by hand
)

// PowerTypes lists the power types an operator may set.
var PowerTypes = []string{PowerTypeIPMI, PowerTypeManual}

// PowerPasswordSecret is the name of the machine secret holding its BMC password.
const PowerPasswordSecret = "power/password"

// DefaultIPMIPort is the UDP port of IPMI over LAN (RMCP+).
const DefaultIPMIPort = 623

// PowerStatus is a machine's power state as the rack last saw it.
type PowerStatus string

// The power states. Error means the last check failed (PowerInfo.LastError says why);
// unknown means nobody checked yet, or the driver cannot tell (manual).
const (
	PowerStateOn      PowerStatus = "on"
	PowerStateOff     PowerStatus = "off"
	PowerStateUnknown PowerStatus = "unknown"
	PowerStateError   PowerStatus = "error"
)

// PowerStatusAction asks a power workflow for the state only; it changes nothing.
const PowerStatusAction PowerAction = "status"

// PowerInfo is a machine's power driver and what the rack last saw of it; the password is not
// here. Only PUT …/power sets the driver and only the machine's rack the state: a machine PUT
// or PATCH keeps the stored PowerInfo whatever it sends.
type PowerInfo struct {
	Type    string `json:"Type"`
	Address string `json:"Address,omitempty"` // host:port of the BMC
	User    string `json:"User,omitempty"`

	State     PowerStatus `json:"State"`
	CheckedAt *time.Time  `json:"CheckedAt,omitempty"`
	LastError string      `json:"LastError,omitempty"`
}

// PowerConfig is what an operator sets: the driver, the BMC's address and user, and its
// password (stored as the machine secret PowerPasswordSecret; empty keeps the stored one).
type PowerConfig struct {
	Type     string `json:"Type"`
	Address  string `json:"Address"`
	User     string `json:"User"`
	Password string `json:"Password"`
}

// String never shows the password, so a logged or printed config leaks nothing.
func (c PowerConfig) String() string {
	return fmt.Sprintf("%s %s@%s", c.Type, c.User, c.Address)
}

// PowerCredential is what the machine's rack fetches to drive the BMC, just before it does.
type PowerCredential struct {
	Machine  string `json:"Machine"`
	Type     string `json:"Type"`
	Address  string `json:"Address"`
	User     string `json:"User"`
	Password string `json:"Password"`
}

// String never shows the password.
func (c PowerCredential) String() string {
	return fmt.Sprintf("%s %s@%s (machine %s)", c.Type, c.User, c.Address, c.Machine)
}

// PowerReport is what the rack found: the state after a check or an action. Action is empty
// for a poll; an action is audited with who asked (the user its verified grant names) and its
// result.
type PowerReport struct {
	State       PowerStatus `json:"State"`
	Error       string      `json:"Error,omitempty"`
	Action      PowerAction `json:"Action,omitempty"`
	RequestedBy string      `json:"RequestedBy,omitempty"`
	Workflow    string      `json:"Workflow,omitempty"`
}

// ValidPowerStatus checks a state a rack reports.
func ValidPowerStatus(s PowerStatus) error {
	switch s {
	case PowerStateOn, PowerStateOff, PowerStateUnknown, PowerStateError:
		return nil
	}
	return fmt.Errorf("power state %q: want on, off, unknown or error", s)
}

// ParsePowerRequest checks an action of `machines power`: on, off, cycle or status.
func ParsePowerRequest(s string) (PowerAction, error) {
	if PowerAction(s) == PowerStatusAction {
		return PowerStatusAction, nil
	}
	a, err := ParsePowerAction(s)
	if err != nil {
		return "", fmt.Errorf("power action %q: want on, off, cycle or status", s)
	}
	return a, nil
}

// CanonBMCAddress checks that addr is host or host:port and returns it as host:port (port
// defaultPort when absent; an IPv6 host bracketed; the host lower-case), so that two spellings
// of one BMC compare equal.
func CanonBMCAddress(addr string, defaultPort int) (string, error) {
	addr = strings.TrimSpace(addr)
	if addr == "" {
		return "", fmt.Errorf("BMC address is empty: want host or host:port")
	}
	host, port := addr, strconv.Itoa(defaultPort)
	if h, p, err := net.SplitHostPort(addr); err == nil {
		host, port = h, p
	} else if strings.Count(addr, ":") > 1 && net.ParseIP(addr) != nil {
		host = addr // a bare IPv6 address
	} else if strings.Contains(addr, ":") {
		return "", fmt.Errorf("BMC address %q is not host[:port]: %w", addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("BMC address %q: port %q is not a number in 1-65535", addr, port)
	}
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	} else if !validHostName(host) {
		return "", fmt.Errorf("BMC address %q: %q is neither an IP address nor a host name", addr, host)
	}
	return net.JoinHostPort(strings.ToLower(host), strconv.Itoa(n)), nil
}

// validHostName accepts DNS names of letters, digits, '-' and '.' (RFC 1123 labels).
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
