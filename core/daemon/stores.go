package daemon

import (
	"berth.dev/core/store"
	"berth.dev/core/store/storeobs"
)

// views are the store's typed views this Core hands its parts, each part
// only the ones it needs: reads, the owner epoch's fenced writes, the
// administrative writes and the Runtime connections' writes. Each is
// observed (storeobs: a span and a duration sample per call, around the
// view rather than inside its queries); the parts name their own narrow
// interfaces, which the observed views satisfy as the store's do.
type views struct {
	reader  *storeobs.Reader
	owner   *storeobs.Owner
	admin   *storeobs.Admin
	runtime *storeobs.Runtime
}

// newViews returns st's views, its fenced writes acting for epoch, each
// observed on the global OpenTelemetry providers.
func newViews(st *store.Store, epoch uint64) views {
	obs := storeobs.New()
	return views{
		reader: storeobs.NewReader(st.Reader(), obs), owner: storeobs.NewOwner(st.AsOwner(epoch), obs),
		admin: storeobs.NewAdmin(st.Admin(), obs), runtime: storeobs.NewRuntime(st.Runtime(), obs),
	}
}

// readOwner is reads and fenced writes: the lifecycle, the node manager
// and registry, the Session service.
type readOwner struct {
	*storeobs.Reader
	*storeobs.Owner
}

// readAdmin is reads and administrative writes: enrollment.
type readAdmin struct {
	*storeobs.Reader
	*storeobs.Admin
}

// readAdminOwner is reads, administrative and fenced writes: deployment
// (the first commit is administrative, a replacement fenced).
type readAdminOwner struct {
	*storeobs.Reader
	*storeobs.Admin
	*storeobs.Owner
}

// readRuntime is reads and a Runtime connection's writes: the gateway.
type readRuntime struct {
	*storeobs.Reader
	*storeobs.Runtime
}

// allViews is every view: core/turns writes Turns for clients (Admin),
// for the owner (claims, sweeps, admission) and for Runtime connections.
type allViews struct {
	*storeobs.Reader
	*storeobs.Owner
	*storeobs.Admin
	*storeobs.Runtime
}

func (v views) readOwner() readOwner           { return readOwner{v.reader, v.owner} }
func (v views) readAdmin() readAdmin           { return readAdmin{v.reader, v.admin} }
func (v views) readRuntime() readRuntime       { return readRuntime{v.reader, v.runtime} }
func (v views) all() allViews                  { return allViews{v.reader, v.owner, v.admin, v.runtime} }
func (v views) readAdminOwner() readAdminOwner { return readAdminOwner{v.reader, v.admin, v.owner} }
