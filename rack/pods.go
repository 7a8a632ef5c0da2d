package rack

import (
	"context"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/ironflow/ironflow/region/api"
)

// DefaultPodRefreshInterval is how often a rack refreshes the facts of the pods it hosts.
const DefaultPodRefreshInterval = 5 * time.Minute

// podDialTimeout bounds reaching a pod's libvirt daemon, and how long a call may wait without a
// word from it: libvirt destroying a stuck QEMU is silent for up to 15 s.
const podDialTimeout = 30 * time.Second

// regionAPI implements rackacts.PodRegion: the pod calls of the rack API and the reads and
// grant checks they need, all with the rack's token through the region link.

// Pod implements rackacts.PodRegion.
func (r regionAPI) Pod(ctx context.Context, key string) (api.Pod, error) {
	return r.region().Pods().Get(asRack(ctx), key)
}

// RackPods implements rackacts.PodRegion.
func (r regionAPI) RackPods(ctx context.Context) ([]api.Pod, error) {
	return r.region().Pods().List(asRack(ctx), url.Values{"Rack": {r.rack}, "limit": {strconv.Itoa(api.MaxPageSize)}})
}

// StorePodFacts implements rackacts.PodRegion.
func (r regionAPI) StorePodFacts(ctx context.Context, pod string, f api.PodFacts) (api.Pod, error) {
	return r.region().StorePodFacts(asRack(ctx), r.rack, pod, f)
}

// DeclarePodVM implements rackacts.PodRegion.
func (r regionAPI) DeclarePodVM(ctx context.Context, pod string, m api.Machine) (api.Machine, error) {
	return r.region().DeclarePodVM(asRack(ctx), r.rack, pod, m)
}

// ForgetPodVM implements rackacts.PodRegion.
func (r regionAPI) ForgetPodVM(ctx context.Context, pod, machine string) error {
	return r.region().ForgetPodVM(asRack(ctx), r.rack, pod, machine)
}

// VerifyGrant implements rackacts.PodRegion.
func (r regionAPI) VerifyGrant(ctx context.Context, check api.GrantCheck) (api.GrantClaims, error) {
	return r.region().VerifyGrant(asRack(ctx), check)
}

// every runs op every interval, the first time one interval after the start (the region link
// is up by then), until ctx ends; a failed round is logged as what, and the next one runs.
// The rack refreshes its pods' facts this way (`pods refresh` is there for sooner; an
// unreachable pod keeps the facts of its last refresh) and polls its machines' power (a
// machine that cannot be checked shows the error on the region).
func every(ctx context.Context, interval time.Duration, what string, log *slog.Logger, op func(context.Context) error) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := op(ctx); err != nil && ctx.Err() == nil {
			log.Warn(what, "error", err)
		}
	}
}
