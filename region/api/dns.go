package api

// DNS: the region is authoritative for its domains and for the reverse zones of its subnets.
//
//	GET/POST/PUT/PATCH/DELETE /api/v1/domains[/{name}]      Domain (keyed by Name)
//	GET/POST/PUT/PATCH/DELETE /api/v1/dnsrecords[/{uuid}]   DNSRecord
//	POST /api/v1/dns-query   a DNS message (Content-Type application/dns-message, RFC 8484
//	     wire format) -> the region's authoritative answer in the same format. Racks send the
//	     queries of their clients for the region's zones here, through their region link.
const (
	KindDomains    = "domains"
	KindDNSRecords = "dnsrecords"
)

// DNSQueryPath is the region's DNS-over-HTTP endpoint; DNSMessageType its media type.
// A query may carry DNSSerialHeader, the serial of the region's data the answer must be at
// least as new as (the serial of the rack's config): a region process whose zones are
// older reads its data again before it answers.
const (
	DNSQueryPath    = PathPrefix + "/dns-query"
	DNSMessageType  = "application/dns-message"
	DNSSerialHeader = "X-Ironflow-DNS-Serial"
)

// Domain is a forward zone the region is authoritative for. Machines with an address get
// "<Name>.<default domain>".
type Domain struct {
	Name        string `json:"Name"` // e.g. "maas.example", lower case, no trailing dot
	Description string `json:"Description"`
	// Default marks the domain machines' names go in; at most one domain is the default.
	Default bool `json:"Default"`
	TTL     int  `json:"TTL"` // seconds for its records; 0: DefaultDNSTTL
	// Upstreams are the resolvers racks forward every other name to ("ip" or "ip:port").
	// Only the default domain carries them: they are the region's, not the domain's.
	Upstreams []string `json:"Upstreams"`
}

// DNSRecord is an operator record in one of the region's domains.
type DNSRecord struct {
	Uuid   string `json:"Uuid"`
	Domain string `json:"Domain"` // a Domain's Name
	Name   string `json:"Name"`   // relative to Domain; "@" is the domain itself
	Type   string `json:"Type"`   // A, AAAA, CNAME, TXT or SRV
	// Data: A and AAAA an address; CNAME a host name; TXT the text; SRV
	// "priority weight port target".
	Data string `json:"Data"`
	TTL  int    `json:"TTL"` // seconds; 0: the domain's
}

// DNS record types an operator may create.
var DNSRecordTypes = []string{"A", "AAAA", "CNAME", "TXT", "SRV"}

// DefaultDNSTTL is the TTL of records whose domain sets none, and of reverse zones.
const DefaultDNSTTL = 30

// RackDNS is what a rack needs to serve DNS: the zones it sends to the region, the
// resolvers it sends everything else to, the region's data revision and the domain DHCP
// hands out (option 15).
type RackDNS struct {
	Domain    string   `json:"Domain"`    // the default domain, "" when there is none
	Zones     []string `json:"Zones"`     // forward and reverse zones of the region, fully qualified
	Upstreams []string `json:"Upstreams"` // "ip:port"
	// Serial is the SOA serial of the region's zones: when it changes, a rack's cached
	// answers for them are stale.
	Serial uint32 `json:"Serial"`
	// Region is the UUID of the region whose zones these are: a rack transferred to another
	// region holds its old region's answers for stale, whatever the serials say (each
	// region counts its own).
	Region string `json:"Region"`
}
