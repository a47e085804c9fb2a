package store

// Reader is the store's read-only view: every method reads and none
// writes, so a consumer that only reads is given a Reader (or its own
// narrow interface of it) and cannot write by mistake. Reads are not
// fenced: any Core may read.
type Reader struct {
	handle
}

// Reader returns the read-only view of the store.
func (s *Store) Reader() *Reader { return &Reader{s.handle} }

// Admin holds the writes that record an operator's or a client's intent
// (enrollment tokens and node enrollment, the provider switch, the first
// deployment commit, Turn submission and cancellation). Each is a
// compare-and-set or an idempotent insert on the rows it names, valid
// whichever Core carries it: the lifecycle acts on it under its own
// fence, so none needs an owner epoch.
type Admin struct {
	handle
}

// Admin returns the administrative writes of the store.
func (s *Store) Admin() *Admin { return &Admin{s.handle} }

// Runtime holds the writes a Runtime connection makes through the
// gateway and core/turns (prepared, keepalive, close, a Turn's start,
// output and result). Each takes the connection's grant (RuntimeConn,
// made only by Owner.AcceptRuntime) instead of raw ids, so it is bound to
// the connection it is made for, and refused once that connection is
// closed or replaced.
type Runtime struct {
	handle
}

// Runtime returns the Runtime connection writes of the store.
func (s *Store) Runtime() *Runtime { return &Runtime{s.handle} }

// reader is the read-only view over the same handle, for a write that
// reads first.
func (s handle) reader() *Reader { return &Reader{s} }
