package nodes

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"berth.dev/platform/nodetls"
	"berth.dev/platform/nodewire"
	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"

	"berth.dev/core/events"
	"berth.dev/core/store"
)

// Store is what the node manager reads and writes: the owner-bound store,
// because presence is recorded under the owner epoch.
type Store interface {
	// Epoch is the owner epoch the manager speaks for on every node
	// connection and records presence under.
	Epoch() uint64
	ListNodes(ctx context.Context, pageSize int, after uuid.UUID) (page []store.Node, next uuid.UUID, err error)
	RecordNodePresence(ctx context.Context, p store.NodePresence) error
	// CurrentGeneration is the committed deployment generation every
	// node's readiness is bound to (errdefs.ErrNotFound before the first
	// commit).
	CurrentGeneration(ctx context.Context) (store.Generation, error)
	// NodeGenerations are the generations a node must serve: what Core
	// publishes to it (ServeGenerations).
	NodeGenerations(ctx context.Context, nodeID uuid.UUID) ([]store.Generation, error)
	// GetAllocationAddresses gives the reference, lane and committed
	// generation of the allocations a proxied call is about.
	GetAllocationAddresses(ctx context.Context, ids []uuid.UUID) ([]store.AllocationAddress, error)
	// BindNodeBackend binds a node serving the committed generation to
	// the backend it reports, once, and returns the bound one.
	BindNodeBackend(ctx context.Context, nodeID uuid.UUID, fingerprint string) (string, error)
	// NodeBackend reads the backend a node is bound to (ErrNotFound while
	// it is unbound).
	NodeBackend(ctx context.Context, nodeID uuid.UUID) (string, error)
	MarkNodeDisconnected(ctx context.Context, nodeID, connectionID uuid.UUID) error
	// PromoteServingPin pins the committed generation as served once a
	// node reports ready for it (a superseded one pins nothing).
	PromoteServingPin(ctx context.Context, generation uint64) (bool, error)
}

// Presence is what Core's connection loop knows of a node right now. It
// says whether Core holds a connection, not whether the node counts as
// present: that is one predicate, the database's (store.NodePresence's
// Present, which placement applies), decided from the records this loop
// writes every presenceEvery.
type Presence struct {
	// Connected: Core holds a connection to the node (its Connect stream
	// is open, or its end is not recorded yet).
	Connected    bool
	ConnectionID string
	// LastReport is when the connection's latest health report arrived
	// (Core's clock).
	LastReport time.Time
	Report     *pb.ConnectResponse
	Hello      *pb.HelloResponse
	// Readiness is the node's readiness for the committed generation as
	// Core last recorded it: the node's probe result for that generation,
	// or not ready with the diagnostic code of the node's mismatch with
	// it (Binding.Check, CheckBackend, DiagnosticNoDeployment). Nil before
	// the first record.
	Readiness *pb.Readiness
	// Generations is the status of every generation the node serves, as
	// it last answered ServeGenerations, each with its latest readiness.
	Generations []*pb.GenerationStatus
}

// Manager keeps one connection per enabled or retired node (serves): a
// loop per node dials
// the node's advertised address with Core's client certificate, checks the
// handshake, opens the Connect stream under Core's owner epoch and
// reconnects with backoff when it ends. A node that hangs holds only its
// own loop. Enrolled (not yet admitted) and removed nodes are not dialled;
// placement, not the manager, keeps retired nodes free of new work.
type Manager struct {
	store    Store
	coreCert tls.Certificate
	ca       *x509.Certificate
	epoch    uint64
	log      *slog.Logger
	interval time.Duration

	// wake asks Run for a reconcile now (Wake); bus hears of each
	// connection established (events.NodeServing).
	wake chan struct{}
	bus  *events.Bus

	mu    sync.Mutex
	loops map[uuid.UUID]*nodeLoop
}

type nodeLoop struct {
	cancel context.CancelFunc
	done   chan struct{}
	// publish asks the loop to publish the node's generations now
	// (Manager.Publish).
	publish chan struct{}

	mu        sync.Mutex
	conn      *Connection
	proxy     *Proxy
	hello     *pb.HelloResponse
	readiness *pb.Readiness
	// served is the node's answer to the latest ServeGenerations on the
	// current connection, and published the generation numbers it
	// published.
	served    []*pb.GenerationStatus
	published []uint64
	// backend is the node's bound backend fingerprint once read: the
	// binding never changes for the node's identity. bindingRead says the
	// binding was read (backend "" then means unbound); until it is, no
	// call is sent (backendErr).
	backend     string
	bindingRead bool
	attempts    int
	// pinned is the highest generation this loop saw pinned as served.
	pinned uint64
}

// NewManager returns a manager for the owner epoch of st. It publishes
// events.NodeServing on bus each time Core's connection to a node is
// established, so the node's lifecycle worker starts, or passes again, at
// once rather than at its next periodic sync or scan.
func NewManager(st Store, coreCert tls.Certificate, ca *x509.Certificate, log *slog.Logger, interval time.Duration, bus *events.Bus) *Manager {
	return &Manager{
		store: st, coreCert: coreCert, ca: ca, epoch: st.Epoch(), log: log, interval: interval,
		loops: map[uuid.UUID]*nodeLoop{}, wake: make(chan struct{}, 1), bus: bus,
	}
}

// Serves reports whether the manager keeps a connection loop for node id.
func (m *Manager) Serves(id uuid.UUID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.loops[id]
	return ok
}

// Publish asks every node loop to publish its node's generations now (a
// generation was committed), not at its next presence record. It never
// blocks.
func (m *Manager) Publish() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range m.loops {
		select {
		case l.publish <- struct{}{}:
		default:
		}
	}
}

// Wake asks for a reconcile with the store now (a node was enabled,
// retired or removed), not at the next interval. It never blocks.
func (m *Manager) Wake() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run reconciles node loops with the store until ctx ends, then stops and
// drains every loop.
func (m *Manager) Run(ctx context.Context) {
	ticker := time.NewTicker(m.interval)
	defer ticker.Stop()
	for {
		m.reconcile(ctx)
		select {
		case <-ctx.Done():
			m.stopAll()
			return
		case <-ticker.C:
		case <-m.wake:
		}
	}
}

// serves reports whether Core keeps a connection to a node in state s:
// every enabled node, and every retired one, whose allocations stay
// observed and whose cleanup must complete although nothing is placed on
// it. An enrolled node was never admitted and holds nothing; a removed one
// holds nothing by definition.
func serves(s store.NodeState) bool { return s == store.NodeEnabled || s == store.NodeRetired }

func (m *Manager) reconcile(ctx context.Context) {
	served := map[uuid.UUID]store.Node{}
	after := uuid.Nil
	for {
		page, next, err := m.store.ListNodes(ctx, 100, after)
		if err != nil {
			m.log.Warn("list nodes", "error", err.Error())
			return
		}
		for _, n := range page {
			if serves(n.State) {
				served[n.ID] = n
			}
		}
		if next == uuid.Nil {
			break
		}
		after = next
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, n := range served {
		if _, ok := m.loops[id]; !ok {
			lctx, cancel := context.WithCancel(ctx)
			l := &nodeLoop{cancel: cancel, done: make(chan struct{}), publish: make(chan struct{}, 1)}
			m.loops[id] = l
			go m.runLoop(lctx, l, n)
		}
	}
	for id, l := range m.loops {
		if _, ok := served[id]; !ok {
			l.cancel()
			delete(m.loops, id)
		}
	}
}

func (m *Manager) stopAll() {
	m.mu.Lock()
	loops := m.loops
	m.loops = map[uuid.UUID]*nodeLoop{}
	m.mu.Unlock()
	for _, l := range loops {
		l.cancel()
		<-l.done
	}
}

// runLoop connects to one node and reconnects until ctx ends. After each
// connection it publishes the node's generations before the node's proxy
// is offered to callers, so no call is made for a generation the node
// was not given.
func (m *Manager) runLoop(ctx context.Context, l *nodeLoop, n store.Node) {
	defer close(l.done)
	backoff := time.Second
	for ctx.Err() == nil {
		conn, proxy, err := m.attach(ctx, l, n)
		if err != nil {
			m.log.Info("node not reachable", "node", n.ID.String(), "error", err.Error())
			l.mu.Lock()
			l.conn = nil
			l.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
		// The binding is read before the proxy is offered: a call is sent
		// only once the node's backend is known to be its bound one.
		m.readBinding(ctx, l, n.ID)
		l.mu.Lock()
		l.proxy = proxy
		l.mu.Unlock()
		m.log.Info("node connected", "node", n.ID.String(), "connection", conn.ConnectionID)
		m.bus.Publish(events.Event{Kind: events.NodeServing, ID: n.ID})
		m.recordPresence(ctx, l, n.ID, conn)
		m.hold(ctx, l, n.ID, conn)
		// Recorded first, then shown: GetNode never reports the node
		// gone while placement may still choose it.
		m.recordDisconnect(ctx, n.ID, conn)
		l.mu.Lock()
		l.conn, l.proxy, l.readiness, l.served, l.published = nil, nil, nil, nil, nil
		l.mu.Unlock()
	}
}

// attach makes one connection attempt to n, counts it, and on success
// records the connection and its hello on l and publishes the node's
// generations, so the proxy it returns is offered only to a node that was
// given them. A failed publish closes the connection and is the attempt's
// failure.
func (m *Manager) attach(ctx context.Context, l *nodeLoop, n store.Node) (*Connection, *Proxy, error) {
	conn, hello, proxy, err := m.connect(ctx, n, l)
	l.mu.Lock()
	l.attempts++
	l.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	l.conn, l.hello, l.served, l.published = conn, hello, hello.GetGenerations(), nil
	l.mu.Unlock()
	if err := m.publish(ctx, l, n.ID, conn); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, proxy, nil
}

// hold keeps a connected node's connection until it ends, ctx ends (then
// it closes it) or a newer Core owns the node. It publishes the node's
// generations again when l.publish signals a change and every
// presenceEvery, and records the node's presence after each; a failed
// publish closes the connection, so the loop reconnects and publishes
// afresh.
func (m *Manager) hold(ctx context.Context, l *nodeLoop, node uuid.UUID, conn *Connection) {
	tick := time.NewTicker(presenceEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			conn.Close()
			return
		case <-conn.Done():
			m.log.Info("node connection ended", "node", node.String(), "error", errString(conn.Err()))
			return
		case <-l.publish:
			if err := m.publish(ctx, l, node, conn); err != nil {
				m.log.Warn("publish generations", "node", node.String(), "error", err.Error())
				conn.Close()
				return
			}
			m.recordPresence(ctx, l, node, conn)
		case <-tick.C:
			if err := m.publish(ctx, l, node, conn); err != nil {
				m.log.Warn("publish generations", "node", node.String(), "error", err.Error())
				conn.Close()
				return
			}
			if errdefs.IsFenced(m.recordPresence(ctx, l, node, conn)) {
				m.log.Warn("a newer Core owns the node; closing this connection", "node", node.String())
				conn.Close()
				return
			}
		}
	}
}

// presenceEvery is how often a connection's latest health report is
// recorded in the store, and the node's generations are checked against
// the store (and published again when they changed).
const presenceEvery = 5 * time.Second

// publish sends the node the generations it must serve
// (store.NodeGenerations, those of its provider kind) when they differ
// from what was last published on conn, bounded, and keeps the node's
// answer. A failed read of the store publishes nothing and is not the
// connection's failure; a failed call is.
func (m *Manager) publish(ctx context.Context, l *nodeLoop, node uuid.UUID, conn *Connection) error {
	rctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	gens, err := m.store.NodeGenerations(rctx, node)
	if err != nil {
		if !errdefs.IsFenced(err) {
			m.log.Warn("read the node's generations", "node", node.String(), "error", err.Error())
		}
		return nil
	}
	l.mu.Lock()
	kind, published := l.hello.GetProviderKind(), l.published
	l.mu.Unlock()
	var mine []store.Generation
	var numbers []uint64
	for _, g := range gens {
		if g.ProviderKind == kind {
			mine = append(mine, g)
			numbers = append(numbers, g.Generation)
		}
	}
	if published != nil && slices.Equal(numbers, published) {
		return nil
	}
	// Generations are immutable: the numbers say whether anything changed,
	// and only a change builds the publication (digests included).
	want := make([]nodewire.Generation, len(mine))
	for i, g := range mine {
		want[i] = Published(g)
	}
	st, err := conn.ServeGenerations(rctx, want)
	if err != nil {
		return err
	}
	if numbers == nil {
		numbers = []uint64{}
	}
	l.mu.Lock()
	l.served, l.published = st, numbers
	l.mu.Unlock()
	m.log.Info("generations published", "node", node.String(), "generations", numbers)
	return nil
}

// publishTimeout bounds one publication: the store read and the node's
// builds of the generations it did not serve yet.
const publishTimeout = 90 * time.Second

// recordPresence records the connection's latest health report, bounded,
// with the node's readiness for the committed generation (readiness):
// a node that does not serve it as committed is recorded not ready with
// the mismatch's diagnostic code, whatever its report says. The report is
// recorded with its age (store.NodePresence.ReportAge), never as new: a
// node whose reports stop while its connection lives stops counting as
// present when its last one is 45 seconds old.
func (m *Manager) recordPresence(ctx context.Context, l *nodeLoop, node uuid.UUID, conn *Connection) error {
	report, arrived := conn.Last()
	if report == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	gen, r, err := m.readiness(rctx, l, node, report)
	if err != nil {
		if !errdefs.IsFenced(err) {
			m.log.Warn("check the node against the committed deployment", "node", node.String(), "error", err.Error())
		}
		return err
	}
	l.mu.Lock()
	pinned := l.pinned
	l.mu.Unlock()
	if r.GetReady() && gen > pinned {
		// The serving pin: the store promotes it only while gen is the
		// current generation, in one statement under the deployment row's
		// lock.
		if _, err := m.store.PromoteServingPin(rctx, gen); err != nil {
			if !errdefs.IsFenced(err) {
				m.log.Warn("promote the serving pin", "node", node.String(), "generation", gen, "error", err.Error())
			}
		} else {
			l.mu.Lock()
			l.pinned = gen
			l.mu.Unlock()
		}
	}
	c := report.GetCapacity()
	err = m.store.RecordNodePresence(rctx, store.NodePresence{
		NodeID: node, ConnectionID: uuid.MustParse(conn.ConnectionID),
		Generation: gen, Ready: r.GetReady(), DiagnosticCode: r.GetDiagnosticCode(),
		CPUMillis: c.GetCpuMillis(), MemoryBytes: c.GetMemoryBytes(), DiskFreeBytes: c.GetDiskFreeBytes(),
		ReportAge: max(time.Since(arrived), 0),
	})
	// Shown (GetNode) once recorded: what the admin API reports, placement
	// already sees.
	l.mu.Lock()
	l.readiness = r
	l.mu.Unlock()
	if err != nil && !errdefs.IsFenced(err) {
		m.log.Warn("record node presence", "node", node.String(), "error", err.Error())
	}
	return err
}

// readiness returns the committed generation (0 before the first commit)
// and the node's readiness for it: its latest probe result for that
// generation (report), unless the node does not serve it as committed
// (Binding.Check) or, when it does, reports another backend than the one
// it is bound to (CheckBackend; the first such report binds it).
func (m *Manager) readiness(ctx context.Context, l *nodeLoop, node uuid.UUID, report *pb.ConnectResponse) (uint64, *pb.Readiness, error) {
	now := timestamppb.Now()
	g, err := m.store.CurrentGeneration(ctx)
	if errdefs.IsNotFound(err) {
		return 0, &pb.Readiness{DiagnosticCode: DiagnosticNoDeployment, CheckedAt: now}, nil
	}
	if err != nil {
		return 0, nil, err
	}
	m.readBinding(ctx, l, node)
	l.mu.Lock()
	kind, backend := l.hello.GetProviderKind(), l.backend
	st := servedStatus(l.served, g.Generation)
	l.mu.Unlock()
	notReady := func(code string) (uint64, *pb.Readiness, error) {
		return g.Generation, &pb.Readiness{Generation: g.Generation, DiagnosticCode: code, CheckedAt: now}, nil
	}
	if code := BindingOf(g).Check(kind, st); code != "" {
		return notReady(code)
	}
	if backend == "" && st.GetBackendFingerprint() != "" {
		if backend, err = m.store.BindNodeBackend(ctx, node, st.GetBackendFingerprint()); err != nil {
			return 0, nil, err
		}
		l.mu.Lock()
		l.backend, l.bindingRead = backend, true
		l.mu.Unlock()
	}
	if code := CheckBackend(st.GetBackendFingerprint(), backend); code != "" {
		return notReady(code)
	}
	if r := latest(st.GetReadiness(), report.GetGenerations()); r != nil {
		return g.Generation, r, nil
	}
	return notReady(DiagnosticGenerationMismatch)
}

// latest returns the newer (by the node's check time) of r, a served
// generation's readiness from the node's latest ServeGenerations answer,
// and the same generation's readiness in reports, the latest health
// report's: a generation built after the report was made is not reported
// by its older probe result.
func latest(r *pb.Readiness, reports []*pb.Readiness) *pb.Readiness {
	for _, rr := range reports {
		if rr.GetGeneration() == r.GetGeneration() && (r == nil || !rr.GetCheckedAt().AsTime().Before(r.GetCheckedAt().AsTime())) {
			return rr
		}
	}
	return r
}

// servedStatus returns the status of generation n in served, nil when the
// node does not serve it.
func servedStatus(served []*pb.GenerationStatus, n uint64) *pb.GenerationStatus {
	for _, st := range served {
		if st.GetGeneration() == n {
			return st
		}
	}
	return nil
}

// recordDisconnect marks the ended connection's presence record
// disconnected, bounded and detached from ctx (Core may be stopping), so
// placement stops choosing the node at once.
func (m *Manager) recordDisconnect(ctx context.Context, node uuid.UUID, conn *Connection) {
	id, err := uuid.Parse(conn.ConnectionID)
	if err != nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := m.store.MarkNodeDisconnected(rctx, node, id); err != nil {
		m.log.Warn("record node disconnect", "node", node.String(), "error", err.Error())
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func (m *Manager) connect(ctx context.Context, n store.Node, l *nodeLoop) (*Connection, *pb.HelloResponse, *Proxy, error) {
	tlsCfg, err := nodetls.ClientConfig(m.coreCert, m.ca, n.ID.String())
	if err != nil {
		return nil, nil, nil, err
	}
	cc, err := Dial(n.AdvertiseAddress, tlsCfg)
	if err != nil {
		return nil, nil, nil, err
	}
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client := pb.NewNodeServiceClient(cc)
	hello, ops, err := Hello(hctx, client)
	if err != nil {
		cc.Close()
		return nil, nil, nil, err
	}
	if hello.GetNodeId() != n.ID.String() {
		cc.Close()
		return nil, nil, nil, errdefs.ErrOwnership
	}
	conn, err := OpenClosing(hctx, client, m.epoch, cc)
	if err != nil {
		return nil, nil, nil, err
	}
	proxy, err := NewProxy(ops, func(context.Context) (*Session, error) {
		if conn.Err() != nil {
			return nil, errdefs.ErrObservationUnavailable
		}
		// Checked for every call, not only when the proxy is handed out:
		// a publication on this connection may change what it serves.
		if err := l.backendErr(); err != nil {
			return nil, err
		}
		return &conn.Session, nil
	}, m.allocationGeneration(n.ID))
	if err != nil {
		conn.Close()
		return nil, nil, nil, err
	}
	return conn, hello, proxy, nil
}

// allocationGeneration returns the GenerationFunc of node's proxy: the
// committed generation of each allocation a call names, which must be one
// of node's, under exactly that reference, read in one query. Anything
// else sends nothing to that reference.
func (m *Manager) allocationGeneration(node uuid.UUID) GenerationFunc {
	return func(ctx context.Context, refs []sandbox.Reference) ([]uint64, []error, error) {
		gens, errs := make([]uint64, len(refs)), make([]error, len(refs))
		ids := make([]uuid.UUID, 0, len(refs))
		for i, ref := range refs {
			id, err := uuid.Parse(ref.AllocationID)
			if err != nil {
				errs[i] = errdefs.Invalid("reference.allocation_id", "must be a canonical lowercase UUID")
				continue
			}
			ids = append(ids, id)
		}
		found, err := m.store.GetAllocationAddresses(ctx, ids)
		if err != nil {
			return nil, nil, err
		}
		byID := make(map[string]store.AllocationAddress, len(found))
		for _, a := range found {
			byID[a.ID.String()] = a
		}
		for i, ref := range refs {
			if errs[i] != nil {
				continue
			}
			a, ok := byID[ref.AllocationID]
			switch {
			case !ok:
				errs[i] = errdefs.ErrNotFound
			case !a.Answers(node, ref):
				errs[i] = errdefs.Invalid("reference", "is not an allocation of this node")
			default:
				gens[i] = uint64(a.Generation)
			}
		}
		return gens, errs, nil
	}
}

// Presence returns what Core knows of node id's connection.
func (m *Manager) Presence(id uuid.UUID) Presence {
	m.mu.Lock()
	l := m.loops[id]
	m.mu.Unlock()
	if l == nil {
		return Presence{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	p := Presence{Hello: l.hello, Readiness: l.readiness}
	// A connection that ended counts until its end is recorded (runLoop):
	// what GetNode shows, placement already sees.
	if l.conn != nil {
		p.Connected = true
		p.ConnectionID = l.conn.ConnectionID
		p.Report, p.LastReport = l.conn.Last()
	}
	// Each served generation with its latest readiness.
	for _, st := range l.served {
		st = proto.CloneOf(st)
		st.Readiness = latest(st.GetReadiness(), p.Report.GetGenerations())
		p.Generations = append(p.Generations, st)
	}
	return p
}

// Provider returns the proxy of node id's current connection.
func (m *Manager) Provider(id uuid.UUID) (*Proxy, error) {
	m.mu.Lock()
	l := m.loops[id]
	m.mu.Unlock()
	if l == nil {
		return nil, errdefs.ErrNotFound
	}
	l.mu.Lock()
	proxy := l.proxy
	l.mu.Unlock()
	if proxy == nil {
		return nil, errdefs.ErrObservationUnavailable
	}
	if err := l.backendErr(); err != nil {
		return nil, err
	}
	return proxy, nil
}

// ErrBackendMismatch refuses every call to a node whose current connection
// serves a generation on another native backend than the one the node is
// bound to (store.Owner.BindNodeBackend): its agent was restarted against
// another engine. Nothing is sent, so nothing of the node's allocations is
// created, observed or cleaned up on the wrong engine and nothing is
// released on the strength of an empty one; its allocations stay owned
// until the node is back on its bound backend, or an operator abandons
// them (Registry.Abandon). The reason is the readiness diagnostic's.
var ErrBackendMismatch error = errdefs.Refuse(errdefs.ErrFailedPrecondition, DiagnosticBackendFingerprintMismatch,
	"node agent runs on another engine than the node is bound to, so nothing is sent: restart it on its bound engine, or retire the node and abandon it")

// errBindingUnread refuses a call while the node's binding could not be
// read yet (the store failed): whether its backend is the bound one is
// unknown, so nothing is sent.
var errBindingUnread = fmt.Errorf("the node's backend binding is not read yet: %w", errdefs.ErrObservationUnavailable)

// backendErr is why no call may be sent on the loop's current connection
// now, nil when one may: the binding must have been read, and every
// generation the node serves with a built adapter must report the bound
// backend. A node not bound yet holds nothing (placement needs a ready
// record, and readiness needs the binding), so calls to it pass.
func (l *nodeLoop) backendErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.bindingRead {
		return errBindingUnread
	}
	if l.backend == "" {
		return nil
	}
	for _, st := range l.served {
		if fp := st.GetBackendFingerprint(); fp != "" && fp != l.backend {
			return ErrBackendMismatch
		}
	}
	return nil
}

// readBinding reads node's backend binding into l unless it was read
// already (it never changes for the node's identity). A failed read
// leaves it unread: calls wait (backendErr) and the next presence record
// reads it again.
func (m *Manager) readBinding(ctx context.Context, l *nodeLoop, node uuid.UUID) {
	l.mu.Lock()
	read := l.bindingRead
	l.mu.Unlock()
	if read {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	fp, err := m.store.NodeBackend(rctx, node)
	switch {
	case errdefs.IsNotFound(err):
		fp = ""
	case err != nil:
		m.log.Warn("read the node's backend binding", "node", node.String(), "error", err.Error())
		return
	}
	l.mu.Lock()
	if !l.bindingRead {
		l.backend, l.bindingRead = fp, true
	}
	l.mu.Unlock()
}

// Nodes returns the nodes the manager keeps a connection loop for: every
// enabled or retired node, connected or not.
func (m *Manager) Nodes() []uuid.UUID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Keys(m.loops))
}
