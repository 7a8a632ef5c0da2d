package rack

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	rackacts "github.com/ironflow/ironflow/activities/rack"
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
	var p api.Pod
	return p, r.call(ctx, http.MethodGet, api.PathPrefix+"/"+api.KindPods+"/"+url.PathEscape(key), nil, &p)
}

// RackPods implements rackacts.PodRegion.
func (r regionAPI) RackPods(ctx context.Context) ([]api.Pod, error) {
	var list []api.Pod
	q := url.Values{"Rack": {r.rack}, "limit": {strconv.Itoa(api.MaxPageSize)}}
	return list, r.call(ctx, http.MethodGet, api.PathPrefix+"/"+api.KindPods+"?"+q.Encode(), nil, &list)
}

// StorePodFacts implements rackacts.PodRegion.
func (r regionAPI) StorePodFacts(ctx context.Context, pod string, f api.PodFacts) (api.Pod, error) {
	var p api.Pod
	return p, r.call(ctx, http.MethodPut, r.podPath(pod)+"/facts", f, &p)
}

// DeclarePodVM implements rackacts.PodRegion.
func (r regionAPI) DeclarePodVM(ctx context.Context, pod string, m api.Machine) (api.Machine, error) {
	var out api.Machine
	return out, r.call(ctx, http.MethodPost, r.podPath(pod)+"/vms", m, &out)
}

// ForgetPodVM implements rackacts.PodRegion.
func (r regionAPI) ForgetPodVM(ctx context.Context, pod, machine string) error {
	return r.call(ctx, http.MethodDelete, r.podPath(pod)+"/vms/"+url.PathEscape(machine), nil, nil)
}

// VerifyGrant implements rackacts.PodRegion.
func (r regionAPI) VerifyGrant(ctx context.Context, check api.GrantCheck) (api.GrantClaims, error) {
	var c api.GrantClaims
	return c, r.call(ctx, http.MethodPost, api.PathPrefix+"/migrate-grants/verify", check, &c)
}

func (r regionAPI) podPath(pod string) string {
	return api.PathPrefix + "/racks/" + r.rack + "/pods/" + url.PathEscape(pod)
}

// refreshPods refreshes the facts of every pod the rack hosts every interval, the first time
// one interval after the start (the region link is up by then; `pods refresh` is there for
// sooner), until ctx ends. A pod that cannot be reached keeps the facts of its last refresh
// and is logged.
func refreshPods(ctx context.Context, every time.Duration, acts *rackacts.Activities, log *slog.Logger) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := rackacts.RefreshPods(asRack(ctx), acts); err != nil && ctx.Err() == nil {
			log.Warn("pod refresh", "error", err)
		}
	}
}
