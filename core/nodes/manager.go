package nodes

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	pb "berth.dev/proto/berth/sandboxnode/v1"
	"berth.dev/sandbox"
	"berth.dev/sandbox/errdefs"
	"berth.dev/sandbox/nodetls"

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
	// node's Hello is checked against (errdefs.ErrNotFound before the
	// first commit).
	CurrentGeneration(ctx context.Context) (store.Generation, error)
	// GetAllocation gives the committed generation of the allocation a
	// proxied call is about.
	GetAllocation(ctx context.Context, id uuid.UUID) (store.Allocation, error)
	// BindNodeBackend binds a node serving the committed generation to
	// the backend it reports, once, and returns the bound one.
	BindNodeBackend(ctx context.Context, nodeID uuid.UUID, fingerprint string) (string, error)
	MarkNodeDisconnected(ctx context.Context, nodeID, connectionID uuid.UUID) error
}

// PresenceWindow is how recent a node's last health report must be for the
// node to count as present (with the current connection and owner epoch).
const PresenceWindow = 45 * time.Second

// Presence is what Core knows of a node's connection right now.
type Presence struct {
	Connected    bool
	ConnectionID string
	LastReport   time.Time
	Report       *pb.ConnectResponse
	Hello        *pb.HelloResponse
	// Mismatch is the diagnostic code of the Hello's mismatch with the
	// committed generation (Binding.Check) when presence was last
	// recorded: the node is not ready whatever its report says. Empty
	// when it matches or nothing is committed.
	Mismatch string
}

// Present reports whether the node counts as present at now.
func (p Presence) Present(now time.Time) bool {
	return p.Connected && !p.LastReport.IsZero() && now.Sub(p.LastReport) < PresenceWindow
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

	// wake asks Run for a reconcile now (Wake); serving is called with a
	// node whose loop just started (OnServe).
	wake    chan struct{}
	serving func(uuid.UUID)

	mu    sync.Mutex
	loops map[uuid.UUID]*nodeLoop
}

type nodeLoop struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	conn     *Connection
	proxy    *Proxy
	hello    *pb.HelloResponse
	mismatch string
	// backend is the node's bound backend fingerprint once read: the
	// binding never changes for the node's identity.
	backend  string
	attempts int
}

// NewManager returns a manager for the owner epoch of st.
func NewManager(st Store, coreCert tls.Certificate, ca *x509.Certificate, log *slog.Logger, interval time.Duration) *Manager {
	return &Manager{
		store: st, coreCert: coreCert, ca: ca, epoch: st.Epoch(), log: log, interval: interval,
		loops: map[uuid.UUID]*nodeLoop{}, wake: make(chan struct{}, 1), serving: func(uuid.UUID) {},
	}
}

// OnServe sets fn, called (without the manager's lock) with a node each
// time Core's connection to it is established, so the node's lifecycle
// worker starts, or passes again, at once rather than at its next
// periodic sync or scan. Call it before Run.
func (m *Manager) OnServe(fn func(uuid.UUID)) { m.serving = fn }

// Serves reports whether the manager keeps a connection loop for node id.
func (m *Manager) Serves(id uuid.UUID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.loops[id]
	return ok
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
			l := &nodeLoop{cancel: cancel, done: make(chan struct{})}
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

// runLoop connects to one node and reconnects until ctx ends.
func (m *Manager) runLoop(ctx context.Context, l *nodeLoop, n store.Node) {
	defer close(l.done)
	backoff := time.Second
	for ctx.Err() == nil {
		conn, hello, proxy, err := m.connect(ctx, n)
		l.mu.Lock()
		l.attempts++
		l.mu.Unlock()
		if err != nil {
			m.log.Info("node not reachable", "node", n.ID.String(), "error", err.Error())
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 30*time.Second)
			continue
		}
		backoff = time.Second
		l.mu.Lock()
		l.conn, l.hello, l.proxy = conn, hello, proxy
		l.mu.Unlock()
		m.log.Info("node connected", "node", n.ID.String(), "connection", conn.ConnectionID, "generation", hello.GetGeneration())
		m.serving(n.ID)
		m.recordPresence(ctx, l, n.ID, conn)
		tick := time.NewTicker(presenceEvery)
	wait:
		for {
			select {
			case <-ctx.Done():
				conn.Close()
				break wait
			case <-conn.Done():
				m.log.Info("node connection ended", "node", n.ID.String(), "error", errString(conn.Err()))
				break wait
			case <-tick.C:
				if errdefs.IsFenced(m.recordPresence(ctx, l, n.ID, conn)) {
					m.log.Warn("a newer Core owns the node; closing this connection", "node", n.ID.String())
					conn.Close()
					break wait
				}
			}
		}
		tick.Stop()
		l.mu.Lock()
		l.conn, l.proxy, l.mismatch = nil, nil, ""
		l.mu.Unlock()
		m.recordDisconnect(ctx, n.ID, conn)
	}
}

// presenceEvery is how often a connection's latest health report is
// recorded in the store.
const presenceEvery = 5 * time.Second

// recordPresence records the connection's latest health report, bounded.
// The node's Hello is checked against the committed generation first
// (Binding.Check): a node that does not serve it is recorded not ready
// with the mismatch's diagnostic code, whatever its report says. Before
// the first commit there is nothing to check against.
func (m *Manager) recordPresence(ctx context.Context, l *nodeLoop, node uuid.UUID, conn *Connection) error {
	report, _ := conn.Last()
	if report == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	mismatch, err := m.mismatch(rctx, l, node)
	if err != nil {
		if !errdefs.IsFenced(err) {
			m.log.Warn("check the node against the committed deployment", "node", node.String(), "error", err.Error())
		}
		return err
	}
	l.mu.Lock()
	l.mismatch = mismatch
	l.mu.Unlock()
	r := report.GetReadiness()
	ready, code := r.GetReady(), r.GetDiagnosticCode()
	if mismatch != "" {
		ready, code = false, mismatch
	}
	c := report.GetCapacity()
	err = m.store.RecordNodePresence(rctx, store.NodePresence{
		NodeID: node, ConnectionID: uuid.MustParse(conn.ConnectionID),
		Generation: conn.Generation, Ready: ready, DiagnosticCode: code,
		CPUMillis: c.GetCpuMillis(), MemoryBytes: c.GetMemoryBytes(), DiskFreeBytes: c.GetDiskFreeBytes(),
	})
	if err != nil && !errdefs.IsFenced(err) {
		m.log.Warn("record node presence", "node", node.String(), "error", err.Error())
	}
	return err
}

// mismatch returns the diagnostic code of the mismatch of l's Hello with
// the committed generation (Binding.Check) or, when it serves that
// generation, with the backend the node is bound to (CheckBackend; the
// first such Hello binds it); "" when it matches or nothing is committed
// yet.
func (m *Manager) mismatch(ctx context.Context, l *nodeLoop, node uuid.UUID) (string, error) {
	l.mu.Lock()
	hello, backend := l.hello, l.backend
	l.mu.Unlock()
	g, err := m.store.CurrentGeneration(ctx)
	if errdefs.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if code := BindingOf(g).Check(hello); code != "" {
		return code, nil
	}
	if backend == "" && hello.GetBackendFingerprint() != "" {
		if backend, err = m.store.BindNodeBackend(ctx, node, hello.GetBackendFingerprint()); err != nil {
			return "", err
		}
		l.mu.Lock()
		l.backend = backend
		l.mu.Unlock()
	}
	return CheckBackend(hello, backend), nil
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

func (m *Manager) connect(ctx context.Context, n store.Node) (*Connection, *pb.HelloResponse, *Proxy, error) {
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
	conn, err := Open(hctx, client, m.epoch, hello.GetGeneration())
	if err != nil {
		cc.Close()
		return nil, nil, nil, err
	}
	go func() { <-conn.Done(); cc.Close() }()
	proxy, err := NewProxy(ops, func(context.Context) (*Session, error) {
		if conn.Err() != nil {
			return nil, errdefs.ErrObservationUnavailable
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
// committed generation of the allocation a call names, which must be one
// of node's, under exactly that reference. Anything else sends nothing.
func (m *Manager) allocationGeneration(node uuid.UUID) GenerationFunc {
	return func(ctx context.Context, ref sandbox.Reference) (uint64, error) {
		id, err := uuid.Parse(ref.AllocationID)
		if err != nil {
			return 0, errdefs.Invalid("reference.allocation_id", "must be a canonical lowercase UUID")
		}
		a, err := m.store.GetAllocation(ctx, id)
		if err != nil {
			return 0, err
		}
		if a.NodeID != node || a.Reference() != ref || a.Generation <= 0 {
			return 0, errdefs.Invalid("reference", "is not an allocation of this node")
		}
		return uint64(a.Generation), nil
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
	p := Presence{Hello: l.hello, Mismatch: l.mismatch}
	if l.conn != nil && l.conn.Err() == nil {
		p.Connected = true
		p.ConnectionID = l.conn.ConnectionID
		p.Report, p.LastReport = l.conn.Last()
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
	defer l.mu.Unlock()
	if l.proxy == nil {
		return nil, errdefs.ErrObservationUnavailable
	}
	return l.proxy, nil
}

// Nodes returns the nodes the manager keeps a connection loop for: every
// enabled or retired node, connected or not.
func (m *Manager) Nodes() []uuid.UUID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Keys(m.loops))
}
