package daemon

import "berth.dev/core/store"

// views are the store's typed views this Core hands its parts, each part
// only the ones it needs: reads, the owner epoch's fenced writes, the
// administrative writes and the Runtime connections' writes.
type views struct {
	reader  *store.Reader
	owner   *store.Owner
	admin   *store.Admin
	runtime *store.Runtime
}

// newViews returns st's views, its fenced writes acting for epoch.
func newViews(st *store.Store, epoch uint64) views {
	return views{reader: st.Reader(), owner: st.AsOwner(epoch), admin: st.Admin(), runtime: st.Runtime()}
}

// readOwner is reads and fenced writes: the lifecycle, the node manager
// and registry, the Session service.
type readOwner struct {
	*store.Reader
	*store.Owner
}

// readAdmin is reads and administrative writes: enrollment.
type readAdmin struct {
	*store.Reader
	*store.Admin
}

// readAdminOwner is reads, administrative and fenced writes: deployment
// (the first commit is administrative, a replacement fenced).
type readAdminOwner struct {
	*store.Reader
	*store.Admin
	*store.Owner
}

// readRuntime is reads and a Runtime connection's writes: the gateway.
type readRuntime struct {
	*store.Reader
	*store.Runtime
}

// allViews is every view: core/turns writes Turns for clients (Admin),
// for the owner (claims, sweeps, admission) and for Runtime connections.
type allViews struct {
	*store.Reader
	*store.Owner
	*store.Admin
	*store.Runtime
}

func (v views) readOwner() readOwner           { return readOwner{v.reader, v.owner} }
func (v views) readAdmin() readAdmin           { return readAdmin{v.reader, v.admin} }
func (v views) readRuntime() readRuntime       { return readRuntime{v.reader, v.runtime} }
func (v views) all() allViews                  { return allViews{v.reader, v.owner, v.admin, v.runtime} }
func (v views) readAdminOwner() readAdminOwner { return readAdminOwner{v.reader, v.admin, v.owner} }
